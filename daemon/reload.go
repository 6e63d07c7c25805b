package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/appset"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/source"
	"github.com/flotilla-gitops/flotilla/window"
)

// reloadInterval is how often the controller looks at its applications file.
const reloadInterval = 5 * time.Second

// DefaultSetsInterval is how often application sets are expanded again
// when the file itself did not change (their generators read git): the
// default of --appset-interval.
const DefaultSetsInterval = time.Minute

// applicationSetter is the part of the controller a reload hands its result to.
type applicationSetter interface {
	SetApplications([]application.Application)
	SetSyncWindows(*window.Set)
	HoldOrphanPruning(bool)
	SetApplicationSets(map[string]bool)
}

// configSource is where the applications file is read from: a file on the
// controller's host, or a file in a git repository.
type configSource interface {
	// read returns the file's content and a version that changes with it
	// (the content itself, or the commit), and the name problems are
	// reported under.
	read(ctx context.Context) (data []byte, version, name string, err error)
}

// fileSource is --config.
type fileSource struct{ path string }

func (s fileSource) read(context.Context) ([]byte, string, string, error) {
	data, err := os.ReadFile(s.path)
	if err != nil {
		return nil, "", s.path, fmt.Errorf("read applications file: %w", err)
	}
	return data, string(data), s.path, nil
}

// gitSource is --config-repo, --config-revision and --config-path: the
// file as of the revision's newest commit, read through the same fetcher
// (and default credentials from FLOTILLA_GIT_*, for the hosts
// FLOTILLA_GIT_CREDENTIAL_HOSTS lists) as every application's source.
type gitSource struct {
	fetcher        *source.Fetcher
	repo, revision string
	path           string
}

func (s gitSource) read(ctx context.Context) ([]byte, string, string, error) {
	name := s.path
	// Only the file's directory need be written when the repository's
	// tree is over the git tree budget; a path that is not local is
	// refused by Contain below, naming --config-path.
	req := source.Request{RepoURL: s.repo, Revision: s.revision}
	if filepath.IsLocal(s.path) {
		req.Path = path.Dir(filepath.ToSlash(s.path))
	}
	rev, err := s.fetcher.Fetch(ctx, req)
	if err != nil {
		return nil, "", name, fmt.Errorf("fetch the applications file's repository: %w", err)
	}
	defer rev.Release()
	name = fmt.Sprintf("%s@%s", s.path, shortCommit(rev.Commit))
	p, err := source.Contain(rev.Dir, s.path)
	if err != nil {
		return nil, rev.Commit, name, fmt.Errorf("--config-path: %w", err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, rev.Commit, name, fmt.Errorf("read applications file at commit %s: %w", shortCommit(rev.Commit), err)
	}
	return data, rev.Commit, name, nil
}

// shortCommit abbreviates a commit of the applications file's repository
// to the width the CLI shows commits in, so a problem names it the way
// `flotilla app get` does.
func shortCommit(commit string) string {
	if len(commit) > 8 {
		return commit[:8]
	}
	return commit
}

// reloader keeps the controller's applications in step with the
// applications file and its application sets. A file (or commit) that does
// not validate is reported (log and a config.rejected event) and the
// applications loaded before are kept: a typo never stops or removes a
// running application. A generated application that does not validate is
// left out alone (see expand).
type reloader struct {
	src    configSource
	ctl    applicationSetter
	policy *access.Policy
	sets   *appset.Expander
	events reconcile.Publisher
	log    *slog.Logger
	// setsEvery is how often sets are expanded again with the file
	// unchanged.
	setsEvery time.Duration
	now       func() time.Time

	version  string            // of the last content read, valid or not
	file     *application.File // the last valid file
	apps     []application.Application
	windows  []application.SyncWindow
	expanded time.Time
	held     bool // some set has never expanded

	// rejected is why the newest file was not loaded, "" once one is; read
	// by the API while watch writes it.
	rejected atomic.Pointer[string]
	// swarms are the destinations of the file being expanded, for the
	// swarms generator: the controller's own and the file's swarms.
	swarms atomic.Pointer[[]string]
}

// swarmNames are the swarms the swarms generator yields: local and those
// of the file whose sets are being expanded.
func (r *reloader) swarmNames() []string {
	if p := r.swarms.Load(); p != nil {
		return *p
	}
	return []string{appset.LocalSwarm}
}

// problem says why the newest applications file was not loaded, or "".
func (r *reloader) problem() string {
	if p := r.rejected.Load(); p != nil {
		return *p
	}
	return ""
}

// load reads, validates and expands the file once, strictly: at start a
// file that does not validate is an error, not something to keep running
// past. A set whose generator fails is reported and generates nothing yet.
func (r *reloader) load(ctx context.Context) (*application.File, []application.Application, error) {
	data, version, name, err := r.src.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	f, err := application.Parse(name, data)
	if err != nil {
		return nil, nil, err
	}
	full, err := r.expand(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	r.version, r.file, r.apps, r.windows = version, f, full.Applications, f.SyncWindows
	return f, full.Applications, nil
}

// expand generates f's sets and validates the result with f's own
// applications. Sets that failed are logged; while one has never expanded,
// orphan removal is held. A generated application that does not validate
// is left out, logged and published (generated.refused): a directory or
// pull request can cost only itself, never the file or the controller's
// start. One that ran before keeps its last good expansion; a newcomer is
// simply not deployed.
func (r *reloader) expand(ctx context.Context, f *application.File) (*application.File, error) {
	var generated []application.Application
	hold := false
	if len(f.ApplicationSets) > 0 {
		var err error
		names := []string{appset.LocalSwarm}
		for _, sw := range f.Swarms {
			names = append(names, sw.Name)
		}
		r.swarms.Store(&names)
		generated, err = r.sets.Expand(ctx, f)
		r.expanded = r.now()
		var multi interface{ Unwrap() []error }
		if errors.As(err, &multi) {
			for _, e := range multi.Unwrap() {
				var se *appset.SetError
				if errors.As(e, &se) && !se.Kept {
					hold = true
				}
				r.log.Warn("application set not expanded", "set", setOf(e), "error", redact.Text(e.Error()))
			}
		}
	}
	full, refused, err := f.Admit(generated, r.ran)
	if len(refused) > 0 && err == nil {
		// An element refused now that ran before keeps its last good
		// expansion; a newcomer simply stays out.
		if kept := r.lastGood(refused); len(kept) > 0 {
			full, _, err = f.Admit(append(admitted(full), kept...), r.ran)
		}
	}
	for _, e := range refused {
		msg := redact.Text(e.Err.Error())
		r.log.Warn("generated application refused; the rest of the file applies, and the element keeps the application it had, if any", "error", msg)
		if r.events != nil {
			r.events.Publish(events.Event{Time: time.Now(), Type: events.GeneratedRefused, Message: msg})
		}
	}
	if err != nil {
		return nil, err
	}
	r.held = hold
	if r.ctl != nil {
		r.ctl.HoldOrphanPruning(hold)
	}
	return full, nil
}

// ran reports whether a generated application is the one its set's
// element produced in the applications loaded last, so a newcomer with its
// name does not displace it.
func (r *reloader) ran(a *application.Application) bool {
	if a.Generated == nil {
		return false
	}
	for i := range r.apps {
		g := r.apps[i].Generated
		if g != nil && r.apps[i].Name == a.Name && g.Set == a.Generated.Set && g.Element == a.Generated.Element {
			return true
		}
	}
	return false
}

// lastGood returns, for each refused application whose set's element
// produced an application in the applications loaded last, that
// application.
func (r *reloader) lastGood(refused []application.Refusal) []application.Application {
	var out []application.Application
	for _, x := range refused {
		g := x.Application.Generated
		if g == nil {
			continue
		}
		for i := range r.apps {
			p := r.apps[i].Generated
			if p != nil && p.Set == g.Set && p.Element == g.Element {
				out = append(out, r.apps[i])
				break
			}
		}
	}
	return out
}

// admitted is the generated applications of an expanded file.
func admitted(full *application.File) []application.Application {
	var out []application.Application
	for _, a := range full.Applications {
		if a.Generated != nil {
			out = append(out, a)
		}
	}
	return out
}

// setPolicies names f's application sets, each with whether it removes the
// stacks of the applications it stops generating.
func setPolicies(f *application.File) map[string]bool {
	out := make(map[string]bool, len(f.ApplicationSets))
	for i := range f.ApplicationSets {
		out[f.ApplicationSets[i].Name] = appset.Prunes(&f.ApplicationSets[i])
	}
	return out
}

func setOf(err error) string {
	var se *appset.SetError
	if errors.As(err, &se) {
		return se.Set
	}
	return ""
}

// watch looks at the file every few seconds, and at once on SIGHUP,
// until ctx ends.
func (r *reloader) watch(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t := time.NewTicker(reloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.check(ctx, false)
		case <-hup:
			r.check(ctx, true)
		}
	}
}

// check reloads when the file changed, and expands the sets again when
// they are due (or force is set). It reports whether the controller's
// applications were replaced.
func (r *reloader) check(ctx context.Context, force bool) bool {
	data, version, name, err := r.src.read(ctx)
	if err != nil {
		r.log.Error("cannot read the applications file; keeping the applications loaded before", "error", redact.Text(err.Error()))
		return false
	}
	f := r.file
	fresh := version != r.version
	if fresh {
		r.version = version
		nf, err := application.Parse(name, data)
		if err != nil {
			r.reject(name, "applications file is invalid", err)
			return false
		}
		f = nf
	} else if f == nil || len(f.ApplicationSets) == 0 || (!force && r.now().Sub(r.expanded) < r.setsEvery) {
		return false
	}
	full, err := r.expand(ctx, f)
	if err != nil {
		r.reject(name, "applications generated by the sets are invalid", err)
		return false
	}
	if fresh {
		// A newer file is valid: an earlier one's problem is over, unless
		// apply finds a new one. A set expanded again from the last valid
		// file says nothing about a newer invalid one.
		r.rejected.Store(nil)
	}
	r.file = f
	return r.apply(full, name)
}

// apply hands a valid expanded file to the controller and the policy.
// Unchanged applications are not handed over again, so expanding sets on
// a timer costs the controller nothing while their output stays the same.
func (r *reloader) apply(full *application.File, name string) bool {
	if r.policy != nil {
		r.policy.SetProjects(full.Projects)
	}
	if !reflect.DeepEqual(full.SyncWindows, r.windows) {
		ws, err := full.Windows()
		if err != nil {
			r.reject(name, "sync windows are invalid", err)
			return false
		}
		r.ctl.SetSyncWindows(ws)
		r.windows = full.SyncWindows
	}
	// Before the applications: a stack its set stopped generating is judged
	// by the policy of the file that stopped generating it.
	r.ctl.SetApplicationSets(setPolicies(full))
	if reflect.DeepEqual(full.Applications, r.apps) {
		return false
	}
	r.ctl.SetApplications(full.Applications)
	r.apps = full.Applications
	r.log.Info("applications file reloaded", "source", name, "applications", len(full.Applications))
	return true
}

// reject reports a file or expansion that was not loaded, once per
// version: in the log and as an event.
func (r *reloader) reject(name, what string, err error) {
	msg := redact.Text(err.Error())
	problem := name + ": " + what + ": " + msg
	r.rejected.Store(&problem)
	r.log.Error(what+"; keeping the applications loaded before", "source", name, "error", msg)
	if r.events != nil {
		r.events.Publish(events.Event{Time: time.Now(), Type: events.ConfigRejected, Message: problem})
	}
}

// reloadApplications parses data as the applications file at path and, only
// if all of it is valid, replaces the controller's set and the policy's
// projects (when policy is not nil) with it. It reports whether the set was
// replaced. Application sets are not expanded here (no repository is read);
// their generated applications are then absent.
func reloadApplications(path string, data []byte, ctl applicationSetter, policy *access.Policy, log *slog.Logger) bool {
	r := &reloader{src: bytesSource{path, data}, ctl: ctl, policy: policy, sets: appset.New(appset.Options{}),
		log: log, now: time.Now, version: "\x00never"}
	return r.check(context.Background(), true)
}

// bytesSource serves fixed content, for reloadApplications.
type bytesSource struct {
	path string
	data []byte
}

func (s bytesSource) read(context.Context) ([]byte, string, string, error) {
	return s.data, string(s.data), s.path, nil
}
