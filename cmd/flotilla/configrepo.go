package main

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"time"

	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/appset"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/source"
)

// configRepoOptions are the controller's flags for an applications file
// kept in git, and for how often application sets are expanded again.
type configRepoOptions struct {
	repo, revision, path string
	setsInterval         time.Duration
}

func (c *configRepoOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.repo, "config-repo", "", "git repository holding the applications file (instead of --config); each new commit is loaded, and one that does not validate is reported and skipped")
	f.StringVar(&c.revision, "config-revision", "HEAD", "branch, tag or commit of --config-repo")
	f.StringVar(&c.path, "config-path", "applications.yaml", "the applications file's path inside --config-repo")
	f.DurationVar(&c.setsInterval, "appset-interval", defaultSetsInterval, "how often application sets read their generators' repositories again while the applications file is unchanged")
}

// check refuses a command line that names no applications file, or two.
func (c *configRepoOptions) check(config string) error {
	switch {
	case config == "" && c.repo == "":
		return usageError{errors.New("--config or --config-repo is required")}
	case config != "" && c.repo != "":
		return usageError{errors.New("--config and --config-repo exclude each other")}
	case c.repo != "" && (c.path == "" || path.IsAbs(c.path) || escapesRepo(c.path)):
		return usageError{fmt.Errorf("--config-path %q must be a path inside the repository", c.path)}
	case c.setsInterval < time.Second:
		return usageError{fmt.Errorf("--appset-interval must be at least 1s, not %s", c.setsInterval)}
	}
	return nil
}

func escapesRepo(p string) bool {
	p = path.Clean(p)
	return p == ".." || len(p) > 2 && p[:3] == "../"
}

// newControllerReloader builds the reloader of `flotilla controller`: the
// file on disk or in git, sets expanded through the controller's fetcher.
func newControllerReloader(o *controllerOptions, fetcher *source.Fetcher, pub reconcile.Publisher, logger *slog.Logger) *reloader {
	var src configSource = fileSource{o.config}
	log := logger.With("component", "controller", "file", o.config)
	if o.configRepo.repo != "" {
		src = gitSource{fetcher: fetcher, repo: o.configRepo.repo, revision: o.configRepo.revision, path: o.configRepo.path}
		log = logger.With("component", "controller", "repo", redact.Text(o.configRepo.repo), "file", o.configRepo.path)
	}
	r := &reloader{
		src:       src,
		events:    pub,
		log:       log,
		setsEvery: o.configRepo.setsInterval,
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
