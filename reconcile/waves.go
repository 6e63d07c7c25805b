package reconcile

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/fault"
	"github.com/flotilla-gitops/flotilla/health"
)

// DefaultSyncTimeout bounds an ordered sync (waves waiting to be Healthy,
// hooks running to completion) of an application whose syncPolicy.wait
// names no timeout.
const DefaultSyncTimeout = 5 * time.Minute

// ordered is what a pass knows about the order of its manifest: the
// x-flotilla fields and the manifest without its hooks, which is everything
// but the hook steps deploy, compare and heal. Both are worked out once per
// manifest (a rollback or a pin changes the pass's manifest after render).
type ordered struct {
	manifest string // the manifest they were read from
	order    compose.Ordering
	services string // manifest without hook jobs
	names    []string
}

// orderings keeps the order of recent manifests: a steady-state pass asks
// for it (health, drift) and must not parse its manifest again every time.
var orderings = struct {
	sync.Mutex
	m map[[32]byte]*ordered // by the manifest's digest
}{m: map[[32]byte]*ordered{}}

// maxOrderings bounds that memory; it starts over when full.
const maxOrderings = 256

// ordering returns the order of the pass's manifest.
func (p *pass) ordering() (*ordered, error) {
	m := p.rendered.Manifest
	if p.ord != nil && p.ord.manifest == m {
		return p.ord, nil
	}
	if !strings.Contains(m, compose.Extension) {
		p.ord = &ordered{manifest: m, order: compose.Ordering{}, services: m}
		return p.ord, nil
	}
	key := sha256.Sum256([]byte(m))
	orderings.Lock()
	o, ok := orderings.m[key]
	orderings.Unlock()
	if ok {
		p.ord = o
		return o, nil
	}
	o, err := readOrdered(m)
	if err != nil {
		return nil, err
	}
	orderings.Lock()
	if len(orderings.m) >= maxOrderings {
		clear(orderings.m)
	}
	orderings.m[key] = o
	orderings.Unlock()
	p.ord = o
	return o, nil
}

func readOrdered(m string) (*ordered, error) {
	ord, err := compose.ReadOrdering(m)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", compose.Extension, err)
	}
	o := &ordered{manifest: m, order: ord, services: m}
	if len(ord) > 0 {
		names, err := compose.ServiceNames(m)
		if err != nil {
			return nil, err
		}
		o.names = slices.DeleteFunc(names, ord.IsHook)
		if ord.HasHooks() {
			if o.services, err = compose.Subset(m, o.names); err != nil {
				return nil, err
			}
		}
	}
	return o, nil
}

// serviceManifest is the manifest a whole deploy, a drift comparison and a
// heal use: the pass's manifest without its hook jobs, which only the hook
// steps write. Hooks are therefore never drift and never healed.
func (p *pass) serviceManifest() (string, error) {
	o, err := p.ordering()
	if err != nil {
		return "", err
	}
	return o.services, nil
}

// hasHooks reports whether the pass's manifest has hook jobs; true when
// its order cannot be read, which is the careful answer.
func (p *pass) hasHooks() bool {
	if p.rendered == nil {
		return false
	}
	o, err := p.ordering()
	return err != nil || o.order.HasHooks()
}

// isHook reports whether the unscoped service is a hook job of the pass's
// manifest; false when the order cannot be read.
func (p *pass) isHook(service string) bool {
	if p.rendered == nil {
		return false
	}
	o, err := p.ordering()
	return err == nil && o.order.IsHook(service)
}

// syncTimeout bounds each ordered part of a sync.
func syncTimeout(app application.Application) time.Duration {
	if w := app.SyncPolicy.Wait; w != nil && w.Timeout.Duration > 0 {
		return w.Timeout.Duration
	}
	return DefaultSyncTimeout
}

// beginSync is called by whichever step writes first in a sync: it makes
// sure the record planned against is still the newest (checkLatest) and
// announces the sync, once per pass. The plan may turn out Unchanged, and
// then nothing is written.
func (c *Controller) beginSync(ctx context.Context, p *pass) error {
	if p.syncBegun {
		return nil
	}
	if err := c.checkLatest(ctx, p); err != nil {
		return err
	}
	if p.action == charts.Unchanged {
		return nil
	}
	p.syncBegun = true
	c.emit(p, events.SyncStarted, "", fmt.Sprintf("deploying revision %d (%s)", p.latestRevision()+1, p.action), nil)
	return nil
}

// applyWaves deploys the manifest's services wave by wave, lowest first, and
// waits for each wave to be Healthy before the next is written. A wave that
// wrote nothing and was already Healthy when the pass observed it costs no
// wait. The last wave is waited for only when PostSync hooks follow it; the
// wait step (syncPolicy.wait) covers it otherwise. A manifest of one wave
// and no PostSync hook is left to apply, which deploys it whole as before.
//
// A wave that is not Healthy in time stops the sync: later waves are not
// written and nothing is recorded, so the next pass tries the same revision
// again, at no cost for the waves that stand.
func (c *Controller) applyWaves(ctx context.Context, p *pass) error {
	if p.action == charts.Unchanged {
		return nil
	}
	o, err := p.ordering()
	if err != nil {
		return stalled("waves", err)
	}
	nums, waves := o.order.Waves(o.names)
	postSync := len(o.order.Hooks(compose.PostSync)) > 0
	if len(nums) <= 1 && !postSync {
		return nil
	}
	if err := c.beginSync(ctx, p); err != nil || p.action == charts.Unchanged {
		return err
	}
	deadline := c.now().Add(syncTimeout(p.app))
	next := p.latestRevision() + 1
	before := map[string]application.Health{}
	for _, s := range p.status.Services {
		before[s.Name] = s.Health
	}
	var total charts.DeployResult
	for i, wave := range waves {
		sub, err := compose.Subset(p.rendered.Manifest, wave)
		if err != nil {
			return stalled("waves", fmt.Errorf("wave %d: %w", nums[i], err))
		}
		res, err := p.backend.DeployStack(context.WithoutCancel(ctx), charts.DeployRequest{
			Stack:    p.app.Stack,
			Manifest: sub,
			Secrets:  p.rendered.Secrets,
			Sealed:   p.rendered.Sealed,
			Labels:   p.deployLabels(next),
			Adopt:    p.app.Adopt,
		})
		total = mergeResults(total, res)
		if err != nil {
			p.deployed = &total
			return deployError("waves", fmt.Errorf("wave %d: %w", nums[i], err))
		}
		p.log.Info("wave applied", "wave", nums[i], "services", len(wave), "writes", res.Writes)
		if i == len(waves)-1 && !postSync {
			break
		}
		if res.Writes == 0 && allHealthy(before, wave) {
			continue
		}
		if err := c.waitHealthy(ctx, p, wave, deadline, nums[i], nums[i+1:]); err != nil {
			p.deployed = &total
			return err
		}
	}
	p.deployed = &total
	p.waved = true
	return nil
}

// deployError classifies a failed deploy like apply does: bad input
// (including the daemon's InvalidArgument) waits for a new commit, anything
// else is retried.
func deployError(step string, err error) error {
	var fe *fault.Error
	if errors.As(err, &fe) || cerrdefs.IsInvalidArgument(err) {
		return stalled(step, err)
	}
	return transient(step, err)
}

// waitHealthy polls the stack until every one of services (unscoped) is
// Healthy, and fails with what names the first one that is not when the
// deadline passes or Swarm rolls one back. The pass's health is judged from
// the last read, so a failed wave leaves an honest status.
func (c *Controller) waitHealthy(ctx context.Context, p *pass, services []string, deadline time.Time, wave int, later []int) error {
	what := func(service string) string {
		msg := fmt.Sprintf("wave %d", wave)
		if service != "" {
			msg += ", service " + service
		}
		return msg
	}
	notWritten := ""
	if len(later) > 0 {
		notWritten = "; wave(s) " + strings.Join(intStrings(later), ", ") + " not written"
	}
	want := make([]expected, 0, len(services))
	all := declaredOf(p)
	for _, e := range all {
		if slices.Contains(services, e.name) {
			want = append(want, e)
		}
	}
	var last map[string]health.Result
	var lastRead []charts.ServiceState
	for {
		states, trusted, err := capability.ReadStack(ctx, p.backend, p.app.Stack)
		if err == nil && trusted {
			lastRead = states
			last = c.resultsFor(states, want)
			if bad := firstUnhealthy(last); bad == "" {
				return nil
			}
			if rb := rolledBackServices(onlyThese(states, services)); len(rb) > 0 {
				c.judgeAfterWave(p, lastRead)
				return stalled("waves", fmt.Errorf("%s: Swarm rolled back %s: %s%s", what(rb[0]), strings.Join(rb, ", "), last[rb[0]].Message, notWritten))
			}
		}
		if !c.now().Before(deadline) {
			bad := firstUnhealthy(last)
			msg := "the stack could not be read"
			if bad != "" {
				msg = fmt.Sprintf("%s: %s", last[bad].Health, last[bad].Message)
			}
			if lastRead != nil {
				c.judgeAfterWave(p, lastRead)
			}
			return stalled("waves", fmt.Errorf("%s is not Healthy within %s: %s%s", what(bad), syncTimeout(p.app), msg, notWritten))
		}
		select {
		case <-ctx.Done():
			return transient("waves", ctx.Err())
		case <-time.After(waitPoll):
		}
	}
}

// judgeAfterWave publishes the health of a read made after a write.
func (c *Controller) judgeAfterWave(p *pass, states []charts.ServiceState) {
	snap := &snapshot{stacks: map[string][]charts.ServiceState{p.app.Stack: states}}
	c.applyHealth(p, snap)
}

func firstUnhealthy(results map[string]health.Result) string {
	for _, n := range sortedKeys(results) {
		if h := results[n].Health; h != application.Healthy && h != application.Suspended {
			return n
		}
	}
	return ""
}

func allHealthy(before map[string]application.Health, services []string) bool {
	for _, s := range services {
		if before[s] != application.Healthy {
			return false
		}
	}
	return true
}

func onlyThese(states []charts.ServiceState, names []string) []charts.ServiceState {
	var out []charts.ServiceState
	for _, s := range states {
		if slices.Contains(names, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

func mergeResults(a, b charts.DeployResult) charts.DeployResult {
	return charts.DeployResult{
		Created:   append(a.Created, b.Created...),
		Updated:   append(a.Updated, b.Updated...),
		Unchanged: append(a.Unchanged, b.Unchanged...),
		Writes:    a.Writes + b.Writes,
	}
}

func intStrings(ns []int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = fmt.Sprint(n)
	}
	return out
}
