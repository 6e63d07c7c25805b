package imagewrite

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/imagepolicy"
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/regauth"
)

// Loop runs the Updater for every application that has imageUpdates, each
// on its own interval, one application at a time (registries and remotes
// are asked politely, not in bursts). A commit makes the application's next
// pass due at once through Refresh; the pass, not the loop, deploys it.
type Loop struct {
	Updater *Updater
	// Apps returns the current applications; it is called on every tick,
	// so a reloaded applications file takes effect.
	Apps func() []application.Application
	// Refresh makes an application's next pass due now.
	Refresh func(app string) error
	// Credentials returns an application's registry credentials (nil
	// for none).
	Credentials func(a *application.Application) (regauth.Resolver, error)
	// Leader, when set, gates every run: only the holder of the lease
	// commits, as only it writes to the swarm.
	Leader func() bool
	Logger *slog.Logger
	// Publish, when set, receives ImageCommitted, ImageProposed and
	// ImageHeld events.
	Publish func(events.Event)
	// Metrics records each run (nil records nothing).
	Metrics *metrics.Metrics
	// Tick is how often due applications are looked for. Default 10s.
	Tick time.Duration

	mu     sync.Mutex
	next   map[string]time.Time
	status map[string]LoopStatus
	held   map[string]map[string]string // app -> file/field -> outcome: reason
}

// LoopStatus is what the loop last did for one application.
type LoopStatus struct {
	// At is when the last run ended; Result and Err are its outcome.
	At     time.Time
	Result Result
	Err    error
	// LastCommit is the last commit the updater pushed for the
	// application, and its committer time: the one this loop pushed, or,
	// after a restart or a failover, the newest one found in git (the
	// branch's last source.OwnSearchDepth commits; with a pull request,
	// the head branch's tip first).
	LastCommit   string
	LastCommitAt time.Time
}

// Application is s as an application's status shows it, errors
// sanitised.
func (s LoopStatus) Application() *application.ImageStatus {
	out := &application.ImageStatus{LastRun: s.At, LastCommit: s.LastCommit, LastCommitTime: s.LastCommitAt}
	if pr := s.Result.PullRequest; pr != nil {
		out.PullRequest = &application.ImagePullRequestStatus{Number: pr.Number, URL: pr.URL, Branch: pr.Head, Base: pr.Base}
	}
	if s.Err != nil {
		out.LastError = redact.Text(s.Err.Error())
	}
	for _, t := range s.Result.Targets {
		f := application.ImageField{Image: t.Image, File: t.File, Field: t.Field, Current: t.Old, Newest: t.Newest,
			Outcome: string(t.Outcome), Reason: t.Reason}
		if t.Err != nil {
			f.Outcome, f.Reason = "error", redact.Text(t.Err.Error())
		}
		out.Fields = append(out.Fields, f)
	}
	return out
}

// ImageStatus is Status(app) for an application's status; nil before its
// first run.
func (l *Loop) ImageStatus(app string) *application.ImageStatus {
	s, ok := l.Status(app)
	if !ok {
		return nil
	}
	return s.Application()
}

// Status returns what the loop last did for app.
func (l *Loop) Status(app string) (LoopStatus, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.status[app]
	return s, ok
}

// Run loops until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	tick := l.Tick
	if tick <= 0 {
		tick = 10 * time.Second
	}
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "imagewrite")
	l.mu.Lock()
	if l.next == nil {
		l.next, l.status, l.held = map[string]time.Time{}, map[string]LoopStatus{}, map[string]map[string]string{}
	}
	l.mu.Unlock()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		l.runDue(ctx, log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (l *Loop) runDue(ctx context.Context, log *slog.Logger) {
	if l.Leader != nil && !l.Leader() {
		return
	}
	apps := l.Apps()
	for i := range apps {
		a := &apps[i]
		if a.ImageUpdates == nil || ctx.Err() != nil {
			continue
		}
		now := time.Now()
		l.mu.Lock()
		due := !now.Before(l.next[a.Name])
		l.mu.Unlock()
		if !due {
			continue
		}
		st := l.runOne(ctx, a, log)
		l.mu.Lock()
		l.next[a.Name] = time.Now().Add(max(a.ImageUpdates.Interval.Duration, time.Second))
		// The newer of what the loop remembers and what this run made or
		// read from git: after a restart or a failover the loop remembers
		// nothing, and a former leader may remember an older commit.
		if prev := l.status[a.Name]; st.LastCommit == "" || prev.LastCommitAt.After(st.LastCommitAt) {
			st.LastCommit, st.LastCommitAt = prev.LastCommit, prev.LastCommitAt
		}
		l.status[a.Name] = st
		l.mu.Unlock()
		l.report(a, st)
	}
}

// report records a run in metrics and publishes its commit, and each field
// newly held back (or held back for a new reason): a tag that stays
// vanished is one event, not one per interval.
func (l *Loop) report(a *application.Application, st LoopStatus) {
	fields := map[string]int{}
	held := map[string]string{}
	var heldTargets []Target
	for _, t := range st.Result.Targets {
		o := string(t.Outcome)
		switch {
		case t.Err != nil:
			o = "error"
			held[t.File+" "+t.Field] = o + ": " + t.Err.Error()
			heldTargets = append(heldTargets, t)
		case t.Outcome == imagepolicy.Backwards || t.Outcome == imagepolicy.Vanished || t.Outcome == imagepolicy.NoCandidate:
			held[t.File+" "+t.Field] = o + ": " + t.Reason
			heldTargets = append(heldTargets, t)
		}
		fields[o]++
	}
	committed := st.Err == nil && st.Result.Commit.Commit != ""
	l.Metrics.ObserveImageRun(a.Name, fields, committed, st.Err != nil)
	if l.Publish == nil {
		return
	}
	if pr := st.Result.PullRequest; st.Err == nil && pr != nil && (pr.Opened || pr.Edited || committed) {
		subject, _, _ := strings.Cut(st.Result.Commit.Message, "\n")
		l.Publish(events.Event{Type: events.ImageProposed, App: a.Name, Stack: a.Stack, Revision: pr.Commit,
			Message: subject, Data: map[string]any{"updates": len(st.Result.Updates()), "number": pr.Number, "url": pr.URL,
				"branch": pr.Head, "opened": pr.Opened}})
	} else if committed {
		subject, _, _ := strings.Cut(st.Result.Commit.Message, "\n")
		l.Publish(events.Event{Type: events.ImageCommitted, App: a.Name, Stack: a.Stack, Revision: st.Result.Commit.Commit,
			Message: subject, Data: map[string]any{"updates": len(st.Result.Updates())}})
	}
	if st.Err != nil {
		return // the run said nothing about the fields
	}
	l.mu.Lock()
	before := l.held[a.Name]
	l.held[a.Name] = held
	l.mu.Unlock()
	for _, t := range heldTargets {
		key := t.File + " " + t.Field
		if before[key] == held[key] {
			continue
		}
		msg := t.Reason
		outcome := string(t.Outcome)
		if t.Err != nil {
			msg, outcome = redact.Text(t.Err.Error()), "error"
		}
		l.Publish(events.Event{Type: events.ImageHeld, App: a.Name, Stack: a.Stack, Message: msg,
			Data: map[string]any{"image": t.Image, "file": t.File, "field": t.Field, "outcome": outcome}})
	}
}

func (l *Loop) runOne(ctx context.Context, a *application.Application, log *slog.Logger) LoopStatus {
	var creds regauth.Resolver
	if l.Credentials != nil {
		c, err := l.Credentials(a)
		if err != nil {
			log.Error("image updates not run: registry credentials unreadable", "app", a.Name, "error", err)
			return LoopStatus{At: time.Now(), Err: err}
		}
		creds = c
	}
	res, err := l.Updater.Run(ctx, a, creds, false)
	st := LoopStatus{At: time.Now(), Result: res, Err: err}
	if own := res.Commit.LastOwn; own.Hash != "" {
		st.LastCommit, st.LastCommitAt = own.Hash, own.Time
	}
	if err != nil {
		log.Error("image updates failed; retried next interval", "app", a.Name, "error", err)
		return st
	}
	if res.Commit.Commit != "" {
		st.LastCommit, st.LastCommitAt = res.Commit.Commit, res.Commit.Time
	}
	// A proposed commit is on the updater's own branch: the deploy waits
	// for a human to merge it, and the merge is what makes a pass due.
	if res.Commit.Commit != "" && a.ImageUpdates.PullRequest == nil {
		if l.Refresh != nil {
			if err := l.Refresh(a.Name); err != nil {
				log.Warn("image update committed, but the application's pass could not be made due; it runs on its interval", "app", a.Name, "error", err)
			}
		}
	}
	return st
}
