package daemon

import (
	"log/slog"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/forgepost"
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// newForgePoster builds what posts the applications' feedback (commit
// statuses, the plan comment) to their forges from the event stream. It
// looks each application up at every event, so a reloaded applications
// file takes effect at once.
func newForgePoster(o *Options, ctl *reconcile.Controller, logger *slog.Logger, m *metrics.Metrics) (*forgepost.Poster, error) {
	opts := forgepost.Options{
		Logger:     logger,
		ConsoleURL: o.ConsoleURL,
		Apps: func(name string) (application.Application, bool) {
			for _, a := range ctl.Applications() {
				if a.Name == name {
					return a, true
				}
			}
			return application.Application{}, false
		},
		OnPost: m.ForgePost,
	}
	if o.PlanComment != nil {
		opts.Plan = o.PlanComment(ctl)
	}
	return forgepost.New(opts)
}
