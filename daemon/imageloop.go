package daemon

import (
	"log/slog"
	"path/filepath"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/imagewrite"
	"github.com/flotilla-gitops/flotilla/internal/apiwire"
	"github.com/flotilla-gitops/flotilla/lease"
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/regauth"
	"github.com/flotilla-gitops/flotilla/registryclient"
)

var _ apiwire.ImageStatuses = (*imagewrite.Loop)(nil)

// newImageLoop is the controller's image automation: one registry client
// for every application (so an image is asked once per interval however
// many use it), scratch clones under the data directory, and with --ha only
// the lease holder committing.
func newImageLoop(o *Options, ctl *reconcile.Controller, ls *lease.Lease, broker *events.Broker, m *metrics.Metrics, logger *slog.Logger) *imagewrite.Loop {
	loop := &imagewrite.Loop{
		Updater: &imagewrite.Updater{
			// Answers are shared for the shortest interval an application
			// may ask for: an image costs at most one query a minute
			// however many applications and services use it, and no
			// application sees answers older than its own interval.
			Registry:   registryclient.New(registryclient.Options{Interval: application.MinImageInterval, PlainHTTP: o.RegistryPlainHTTP, Logger: logger}),
			Logger:     logger,
			ScratchDir: filepath.Join(o.DataDir, "image-commits"),
		},
		Apps:    ctl.Applications,
		Refresh: ctl.Refresh,
		Credentials: func(a *application.Application) (regauth.Resolver, error) {
			if a.RegistryAuth == nil {
				return nil, nil
			}
			c, err := regauth.FromFile(a.RegistryAuth.Path())
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		Logger:  logger,
		Publish: func(e events.Event) { broker.Publish(e) },
		Metrics: m,
	}
	if ls != nil {
		loop.Leader = func() bool { return ls.State().Leader }
	}
	return loop
}
