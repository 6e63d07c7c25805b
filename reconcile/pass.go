package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/source"
)

// Labels Flotilla stamps on every service it writes. They are per-deploy
// metadata, so they go on service labels only.
const (
	LabelOwner    = "io.flotilla.owner"
	LabelRelease  = "io.flotilla.release"
	LabelRevision = "io.flotilla.revision"
	LabelCommit   = "io.flotilla.commit"
)

// Trigger values recorded with a release.
const (
	TriggerAutomated = "automated"
	TriggerSync      = "sync"
)

// pass is one reconcile of one application. Steps fill it in order.
type pass struct {
	app     application.Application
	owner   string
	request *SyncRequest // non-nil for an explicit sync
	// snapshot is the swarm read shared by every application of a batch.
	snapshot *snapshot

	rev      *source.Revision
	rendered *compose.Rendered
	chart    *charts.ChartRef // set when rendered from a chart, see chart.go
	declared *compose.Stack
	latest   *charts.Release
	action   charts.Action

	// backend is the controller's backend decorated for this application
	// (out-of-band notifier, allowlist, credentials) where it can be.
	backend charts.Backend

	drifted []string // scoped services whose live spec drifted
	missing []string // scoped services declared but absent

	// rollbackOf is the record a rollback pass redeploys.
	rollbackOf *charts.Release

	deployed *charts.DeployResult
	healed   *charts.DeployResult
	recorded *charts.Release

	// status is written only from the pass's goroutine: the backend calls
	// the out-of-band notifier synchronously, inside the write it reports.
	status application.Status
	log    *slog.Logger
}

// snapshot is one read of the swarm for many stacks; err is set when the read
// failed, in which case no stack in it can be trusted.
type snapshot struct {
	stacks map[string][]charts.ServiceState
	err    error

	// Network names are not stack-scoped, so one listing serves every
	// application of the batch; it is made on first use.
	netOnce  sync.Once
	netNames map[string]string
	netErr   error
}

// networkNames lists the swarm's networks once per snapshot. If the backend
// implements NetworkNamer the map is filled, otherwise it is nil and network
// attachments go uncompared.
func (s *snapshot) networkNames(ctx context.Context, b charts.Backend) (map[string]string, error) {
	s.netOnce.Do(func() {
		if nn, ok := capability.As[capability.NetworkNamer](b); ok {
			s.netNames, s.netErr = nn.LiveNetworkNames(ctx)
		}
	})
	return s.netNames, s.netErr
}

// step is one stage of a pass. The first step that fails ends the pass.
type step struct {
	name string
	run  func(c *Controller, ctx context.Context, p *pass) error
}

// steps is the pass, in order. Each does one thing; see its function's doc.
var steps = []step{
	{"fetch", (*Controller).fetch},
	{"render", (*Controller).render},
	{"plan", (*Controller).plan},
	{"observe", (*Controller).observe},
	{"drift", (*Controller).detectDrift},
	{"gate", (*Controller).gate},
	{"apply", (*Controller).apply},
	{"correct", (*Controller).correct},
	{"wait", (*Controller).wait},
	{"sweep", (*Controller).sweepStep},
	{"confirm", (*Controller).confirm},
}

// errGated ends a pass early without failing it: a manual application that
// was planned and reported but not asked to sync.
var errGated = errors.New("gated")

// fetch resolves the application's revision to a commit and its tree.
func (c *Controller) fetch(ctx context.Context, p *pass) error {
	revision := p.app.Source.Revision
	if p.request != nil && p.request.Revision != "" {
		revision = p.request.Revision
	}
	began := c.now()
	rev, err := c.opts.Fetcher.Fetch(ctx, source.Request{
		RepoURL:     p.app.Source.RepoURL,
		Revision:    revision,
		Credentials: p.app.Source.Credentials,
	})
	c.opts.Metrics.ObserveGitFetch(p.app.Source.RepoURL, c.now().Sub(began), err)
	if err != nil {
		if errors.Is(err, source.ErrRevisionNotFound) {
			return stalled("fetch", err)
		}
		return transient("fetch", err)
	}
	p.rev = rev
	p.status.SeenRevision = rev.Commit
	return nil
}

// render turns the checkout into a manifest and converts it without the
// swarm, so that everything a deploy could object to is found before any
// write.
func (c *Controller) render(ctx context.Context, p *pass) error {
	if p.request != nil && p.request.Rollback > 0 {
		return c.renderRollback(ctx, p, p.request.Rollback)
	}
	ids := c.opts.SOPS
	if k := p.app.SOPS; k != nil {
		// An application's own key replaces the controller's, so one
		// repository cannot have another application's files decrypted.
		// Read every pass: a rotated key file is picked up.
		var err error
		if ids, err = sopsage.ReadIdentityFile(k.AgeKeyFile); err != nil {
			return transient("render", fmt.Errorf("sops.ageKeyFile: %w", err))
		}
	}
	if p.app.Source.Chart != nil {
		return c.renderChart(ctx, p, ids)
	}
	d := compose.Dir{
		Root:     p.rev.Dir,
		Path:     p.app.Source.Path,
		Files:    p.app.Source.Compose.Files,
		EnvFiles: p.app.Source.Compose.EnvFiles,
		Decrypt:  ids.Decrypt,
	}
	r, err := c.opts.Render(p.app.Stack, d)
	if err != nil {
		return stalled("render", err)
	}
	declared, err := compose.Convert(ctx, r.Manifest, p.app.Stack, nil)
	if err != nil {
		return stalled("render", err)
	}
	p.rendered, p.declared = r, declared
	return nil
}

// plan compares the manifest with the newest release record.
func (c *Controller) plan(ctx context.Context, p *pass) error {
	latest, err := c.latestRelease(ctx, p.app.Stack)
	if err != nil {
		return transient("plan", err)
	}
	if latest != nil && !c.mayTakeOver(latest.Owner, p.app.Name) {
		return stalled("plan", fmt.Errorf("stack %q is owned by %q, not by this controller (%q)", p.app.Stack, latest.Owner, c.opts.ControllerID))
	}
	p.latest = latest
	p.status.Pinned = ""
	if pinned(latest, p) {
		// A rollback holds while git still points where it pointed then.
		// Automated passes stay on the record; an explicit sync leaves it.
		p.status.Pinned = pinMessage(latest)
		if p.request == nil {
			if err := c.useRecord(ctx, p, latest); err != nil {
				return err
			}
		}
	}
	p.action = charts.Plan(p.rendered.Manifest, p.owner, latest)
	if latest != nil {
		p.status.LastAppliedRevision = latest.Revision
		p.status.Chart = chartLabel(latest.Chart)
		p.status.Revision = latest.Commit
	}
	return nil
}

// mayTakeOver reports whether a stack recorded as owned by owner may be
// deployed by this controller's application app. Another controller's stack
// never is; another application of this controller's is (a rename hands the
// stack over), since the applications file already refuses two applications
// on one stack.
func (c *Controller) mayTakeOver(owner, app string) bool {
	id, _, ok := splitOwner(owner)
	return ok && id == c.opts.ControllerID
}

// observe reads what runs and records sync and health before anything is
// written, so a pass that fails later still leaves an honest status.
func (c *Controller) observe(ctx context.Context, p *pass) error {
	snap := p.snapshot
	if snap == nil {
		s, err := capability.ReadStacks(ctx, c.opts.Backend, []string{p.app.Stack})
		snap = &snapshot{stacks: s, err: err}
	}
	c.applyHealth(p, snap)
	switch p.action {
	case charts.Unchanged:
		p.status.Sync = application.Synced
		p.status.SyncReason = application.ReasonNone
	default:
		p.status.Sync = application.OutOfSync
		p.status.SyncReason = application.ReasonGit
	}
	c.publish(p)
	return nil
}

// gate stops a manual application that was not asked to sync: it has been
// planned and reported, and that is all it gets.
func (c *Controller) gate(ctx context.Context, p *pass) error {
	if p.request != nil && p.request.DryRun {
		return errGated
	}
	if p.app.SyncPolicy.Automated == nil && p.request == nil {
		// Not applied, but what a sync would remove is still worth showing.
		if err := c.sweepStep(ctx, p); err != nil {
			p.log.Warn("could not work out pending removals", "error", err)
		}
		return errGated
	}
	return nil
}

// apply deploys a changed manifest and records the revision. An unchanged
// plan writes nothing at all.
func (c *Controller) apply(ctx context.Context, p *pass) error {
	if p.action == charts.Unchanged {
		return nil
	}
	next := p.latestRevision() + 1
	c.emit(p, events.SyncStarted, "", fmt.Sprintf("deploying revision %d (%s)", next, p.action), nil)
	res, err := p.backend.DeployStack(ctx, charts.DeployRequest{
		Stack:    p.app.Stack,
		Manifest: p.rendered.Manifest,
		Secrets:  p.rendered.Secrets,
		Labels:   p.deployLabels(next),
		Adopt:    p.app.Adopt,
	})
	if err != nil {
		var fe *fault.Error
		if errors.As(err, &fe) {
			return stalled("apply", err)
		}
		return transient("apply", err)
	}
	p.deployed = &res
	rec := charts.Release{
		Name:     p.app.Stack,
		Revision: next,
		Owner:    p.owner,
		Manifest: p.rendered.Manifest,
		Commit:   p.rev.Commit,
		Author:   p.rev.Author,
		Message:  p.rev.Message,
		Time:     c.now(),
		Trigger:  TriggerAutomated,
		Chart:    p.chart,
	}
	if p.request != nil {
		rec.Trigger = TriggerSync
		if p.request.Rollback > 0 {
			rec.Trigger = fmt.Sprintf("rollback to revision %d", p.request.Rollback)
			rec.Commit, rec.Author, rec.Message = p.rollbackOf.Commit, p.rollbackOf.Author, p.rollbackOf.Message
			rec.PinnedCommit = p.rev.Commit
		}
		if p.request.By != "" {
			rec.Trigger += " by " + p.request.By
		}
	}
	if err := p.backend.RecordRelease(ctx, rec, p.app.History); err != nil {
		c.forgetRelease(p.app.Stack)
		return transient("record", err)
	}
	c.rememberRelease(rec)
	p.recorded = &rec
	p.log.Info("deployed revision", "revision", next, "commit", shortCommit(p.rev.Commit),
		"created", len(res.Created), "updated", len(res.Updated), "unchanged", len(res.Unchanged), "writes", res.Writes)
	return nil
}

// confirm plans again after a deploy. A release that still differs right
// after its own deploy is reported rather than redeployed in a loop.
func (c *Controller) confirm(ctx context.Context, p *pass) error {
	if p.recorded == nil && p.healed == nil {
		return nil
	}
	if p.recorded != nil {
		latest, err := c.latestRelease(ctx, p.app.Stack)
		if err != nil {
			return transient("confirm", err)
		}
		if a := charts.Plan(p.rendered.Manifest, p.owner, latest); a != charts.Unchanged {
			return transient("confirm", fmt.Errorf("release %s still plans as %s right after revision %d was recorded", p.app.Stack, a, p.recorded.Revision))
		}
		p.status.Sync = application.Synced
		p.status.SyncReason = application.ReasonNone
		p.status.Revision = p.recorded.Commit
		p.status.LastAppliedRevision = p.recorded.Revision
		p.status.Chart = chartLabel(p.recorded.Chart)
		p.status.LastSyncTime = c.now()
		p.status.Pinned = ""
		if p.recorded.PinnedCommit != "" {
			p.status.Pinned = pinMessage(p.recorded)
		}
		c.emit(p, events.SyncSucceeded, "", fmt.Sprintf("revision %d deployed (%s)", p.recorded.Revision, p.recorded.Trigger), nil)
	}
	// Health after a write is read fresh: the batch snapshot predates it.
	states, trusted, rerr := capability.ReadStack(ctx, p.backend, p.app.Stack)
	snap := &snapshot{stacks: map[string][]charts.ServiceState{}, err: rerr}
	if trusted {
		snap.stacks[p.app.Stack] = states
	}
	c.applyHealth(p, snap)
	return nil
}

// latestRevision is the newest recorded revision number, 0 before the first.
func (p *pass) latestRevision() int {
	if p.latest == nil {
		return 0
	}
	return p.latest.Revision
}

// deployLabels are the service labels a write of this pass stamps.
func (p *pass) deployLabels(revision int) map[string]string {
	return map[string]string{
		LabelOwner:    p.owner,
		LabelRelease:  p.app.Stack,
		LabelRevision: strconv.Itoa(revision),
		LabelCommit:   p.rev.Commit,
	}
}

func splitOwner(owner string) (controller, app string, ok bool) {
	for i := len(owner) - 1; i >= 0; i-- {
		if owner[i] == '/' {
			return owner[:i], owner[i+1:], i > 0 && i < len(owner)-1
		}
	}
	return "", "", false
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// now is the controller's clock.
func (c *Controller) now() time.Time { return c.opts.Clock() }
