package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/appset"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/source"
)

// ConfigRepoOptions are the controller's flags for an applications file
// kept in git, and for how often application sets are expanded again.
type ConfigRepoOptions struct {
	Repo, Revision, Path string
	SetsInterval         time.Duration
}

// check refuses a command line that names no applications file, or two.
func (c *ConfigRepoOptions) check(config string) error {
	switch {
	case config == "" && c.Repo == "":
		return UsageError{errors.New("--config or --config-repo is required")}
	case config != "" && c.Repo != "":
		return UsageError{errors.New("--config and --config-repo exclude each other")}
	case c.Repo != "" && (c.Path == "" || path.IsAbs(c.Path) || escapesRepo(c.Path)):
		return UsageError{fmt.Errorf("--config-path %q must be a path inside the repository", c.Path)}
	case c.SetsInterval < time.Second:
		return UsageError{fmt.Errorf("--appset-interval must be at least 1s, not %s", c.SetsInterval)}
	}
	return nil
}

func escapesRepo(p string) bool {
	p = path.Clean(p)
	return p == ".." || len(p) > 2 && p[:3] == "../"
}

// newControllerReloader builds the reloader of `flotilla controller`: the
// file on disk or in git, sets expanded through the controller's fetcher.
func newControllerReloader(o *Options, fetcher *source.Fetcher, pub reconcile.Publisher, logger *slog.Logger) *reloader {
	var src configSource = fileSource{o.Config}
	log := logger.With("component", "controller", "file", o.Config)
	if o.ConfigRepo.Repo != "" {
		src = gitSource{fetcher: fetcher, repo: o.ConfigRepo.Repo, revision: o.ConfigRepo.Revision, path: o.ConfigRepo.Path}
		log = logger.With("component", "controller", "repo", redact.Text(o.ConfigRepo.Repo), "file", o.ConfigRepo.Path)
	}
	r := &reloader{
		src:       src,
		events:    pub,
		log:       log,
		setsEvery: o.ConfigRepo.SetsInterval,
		now:       time.Now,
	}
	r.sets = appset.New(appset.Options{Fetcher: fetcher, Refs: fetcher, Swarms: r.swarmNames, Log: log})
	return r
}

// attach hands the loaded file's windows and orphan hold to ctl, which
// later reloads update.
func (r *reloader) attach(ctl *reconcile.Controller, f *application.File) error {
	r.ctl = ctl
	ws, err := f.Windows()
	if err != nil {
		return err
	}
	ctl.SetSyncWindows(ws)
	ctl.HoldOrphanPruning(r.held)
	ctl.SetApplicationSets(setPolicies(f))
	return nil
}
