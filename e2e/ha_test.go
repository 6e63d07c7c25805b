package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/labels"
)

// Two controllers run with --ha, each reaching dockerd through a proxy of
// its own that records every write the daemon is sent (with the epoch
// label it carries) and can kill its controller or cut it off. The product
// carries no hook for either.

// haLease is short, so hand-overs are quick, and still several times the
// few seconds a loaded daemon may take to answer a renewal: a lease shorter
// than that changes hands on every slow answer (safely, with a new epoch
// each time, but a pass then rarely finishes).
const haLease = 6 * time.Second

// haWrite is one write a controller sent towards the daemon.
type haWrite struct {
	At        time.Time
	Kind      string // service, network, config, secret, lease
	Op        string // create, update, remove
	Name      string
	Epoch     string // the io.flotilla.epoch label of the body, if any
	Status    int    // the daemon's answer; 0 when it never reached it
	Forwarded bool   // the daemon received it
	Held      bool   // it arrived while the proxy was cutting writes off
}

// haProxy stands between one controller and dockerd.
type haProxy struct {
	Socket string

	mu       sync.Mutex
	writes   []haWrite
	killAt   int // kill after the daemon answered this many service writes; 0 never
	services int
	kill     func()
	held     bool
	release  chan struct{}
}

var haWritePath = regexp.MustCompile(`^(?:/v[0-9.]+)?/(services|networks|configs|secrets)(?:/([^/]+))?(?:/(update))?$`)

func newHAProxy(t *testing.T) *haProxy {
	t.Helper()
	p := &haProxy{release: make(chan struct{})}
	var stop func()
	p.Socket, stop = serveDockerProxy(t, "flt-ha", p.roundTrip)
	t.Cleanup(func() {
		p.cut(false)
		stop()
	})
	return p
}

// killAfterServiceWrite SIGKILLs through kill once the daemon has answered
// the nth service write from now on.
func (p *haProxy) killAfterServiceWrite(n int, kill func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.services, p.killAt, p.kill = 0, n, kill
}

// cut starts (true) or ends (false) a partition of writes: every write,
// the lease's included, is held unanswered, as a connection that stopped
// delivering would hold it. Reads pass. When the partition ends, a held
// write whose sender still waits is delivered late, as a network that
// recovers delivers it; one whose sender gave up is dropped.
func (p *haProxy) cut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.held {
		return
	}
	p.held = on
	if !on {
		close(p.release)
		p.release = make(chan struct{})
	}
}

func (p *haProxy) log() []haWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]haWrite(nil), p.writes...)
}

func (p *haProxy) roundTrip(base http.RoundTripper, r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return base.RoundTrip(r)
	}
	w := haWrite{At: time.Now()}
	if m := haWritePath.FindStringSubmatch(r.URL.Path); m != nil {
		w.Kind = strings.TrimSuffix(m[1], "s")
		switch {
		case r.Method == http.MethodDelete:
			w.Op = "remove"
		case m[2] == "create":
			w.Op = "create"
		case m[3] == "update":
			w.Op = "update"
		}
	}
	if r.Body != nil && w.Op != "remove" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var obj struct {
			Name   string
			Labels map[string]string
		}
		if json.Unmarshal(body, &obj) == nil {
			w.Name, w.Epoch = obj.Name, obj.Labels[backend.LabelEpoch]
			if obj.Labels[labels.Lease] != "" {
				w.Kind = "lease"
			}
		}
	}
	p.mu.Lock()
	held, release := p.held, p.release
	p.mu.Unlock()
	if held {
		w.Held = true
		select {
		case <-release:
		case <-r.Context().Done():
		}
		if r.Context().Err() != nil {
			p.record(w)
			return nil, r.Context().Err()
		}
	}
	resp, err := base.RoundTrip(r)
	w.Forwarded = true
	if err == nil {
		w.Status = resp.StatusCode
	}
	p.record(w)
	p.mu.Lock()
	hit := false
	if w.Kind == "service" && err == nil && resp.StatusCode < 300 && p.killAt > 0 {
		p.services++
		hit = p.services == p.killAt
	}
	kill := p.kill
	p.mu.Unlock()
	if hit {
		kill()
		resp.Body.Close()
		return nil, errKilled
	}
	return resp, err
}

func (p *haProxy) record(w haWrite) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes = append(p.writes, w)
}

// haMember is one controller of the pair.
type haMember struct {
	id    string
	proxy *haProxy
	ctl   *stoppable
	url   string
}

func startHA(t *testing.T, apps, controllerID, haID string) *haMember {
	t.Helper()
	m := &haMember{id: haID, proxy: newHAProxy(t)}
	addr := freeAddr(t)
	m.url = "http://" + addr
	m.ctl = startController(t, apps, controllerID, []string{"DOCKER_HOST=unix://" + m.proxy.Socket},
		"--ha", "--ha-id", haID, "--lease-duration", haLease.String(), "--listen", addr, "--insecure-no-auth")
	return m
}

func (m *haMember) readiness(t *testing.T) (api.Readiness, int) {
	t.Helper()
	resp, err := http.Get(m.url + "/readyz")
	if err != nil {
		return api.Readiness{}, 0
	}
	defer resp.Body.Close()
	var rd api.Readiness
	_ = json.NewDecoder(resp.Body).Decode(&rd)
	return rd, resp.StatusCode
}

// waitRole waits until the member reports role (and, for a standby, that
// leader leads), returning when it first did.
func (m *haMember) waitRole(t *testing.T, role, leader string, within time.Duration) time.Time {
	t.Helper()
	swarmtest.Eventually(t, within, func() (bool, string) {
		rd, code := m.readiness(t)
		return rd.Role == role && (leader == "" || rd.Leader == leader), fmt.Sprintf("%s: readyz %d %+v", m.id, code, rd)
	})
	return time.Now()
}

// waitLeaseHolder waits until the lease config in the swarm names holder,
// returning when it first saw that.
func waitLeaseHolder(t *testing.T, controllerID, holder string, within time.Duration) time.Time {
	t.Helper()
	swarmtest.Eventually(t, within, func() (bool, string) {
		c, err := swarmtest.Client(t).ConfigInspect(context.Background(), "flotilla-lease."+controllerID, client.ConfigInspectOptions{})
		if err != nil {
			return false, err.Error()
		}
		return c.Config.Spec.Labels[labels.LeaseHolder] == holder, fmt.Sprintf("lease labels %v", c.Config.Spec.Labels)
	})
	return time.Now()
}

func (m *haMember) post(t *testing.T, path string) (int, api.Error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, m.url+path, strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.RequestHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e
}

const haStackV = `version: "3.8"
services:
  one:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    environment: {APP_MESSAGE: "%[1]s"}
    deploy: {replicas: 0}
  two:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    environment: {APP_MESSAGE: "%[1]s"}
    deploy: {replicas: 0}
  three:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    environment: {APP_MESSAGE: "%[1]s"}
    deploy: {replicas: 0}
`

// haSetup deploys revision 1 with a leads and b standing by.
func haSetup(t *testing.T, prefix string) (stack string, repo *gittest.Repo, a, b *haMember) {
	t.Helper()
	stack = swarmtest.Name(t, prefix)
	swarmtest.Cleanup(t, stack)
	t.Cleanup(func() {
		_, _ = swarmtest.Client(t).ConfigRemove(context.Background(), "flotilla-lease."+stack, client.ConfigRemoveOptions{})
	})
	repo = gittest.New(t)
	repo.Commit("v1", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(haStackV, "v1")})
	apps := shutdownApps(t, stack, repo.Dir, "")
	a = startHA(t, apps, stack, "a-"+stack)
	a.waitRole(t, "leader", "", 30*time.Second)
	a.ctl.waitLog("deployed revision", 60*time.Second)
	b = startHA(t, apps, stack, "b-"+stack)
	b.waitRole(t, "standby", a.id, 30*time.Second)
	if code, e := b.post(t, "/api/v1/applications/"+stack+"/sync"); code != http.StatusServiceUnavailable || e.Code != api.CodeStandby || !strings.Contains(e.Message, a.id) {
		t.Fatalf("sync sent to the standby: %d %+v, want 503 naming %s", code, e, a.id)
	}
	return stack, repo, a, b
}

// revisions returns the stack's recorded revisions, newest first, with the
// epoch label of each record.
func revisions(t *testing.T, stack string) ([]int, map[int]string) {
	t.Helper()
	be, err := backend.New(context.Background(), backend.Options{Host: swarmtest.Client(t).DaemonHost(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rels, err := be.Releases(context.Background(), stack)
	if err != nil {
		t.Fatal(err)
	}
	var revs []int
	for _, r := range rels {
		revs = append(revs, r.Revision)
	}
	epochs := map[int]string{}
	list, err := swarmtest.Client(t).ConfigList(context.Background(), client.ConfigListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if c.Spec.Labels[backend.LabelRelease] == stack && c.Spec.Labels[backend.LabelRecord] != "" {
			var n int
			fmt.Sscan(c.Spec.Labels[backend.LabelRevision], &n)
			epochs[n] = c.Spec.Labels[backend.LabelEpoch]
		}
	}
	return revs, epochs
}

func waitRevision(t *testing.T, stack string, rev int, within time.Duration) {
	t.Helper()
	swarmtest.Eventually(t, within, func() (bool, string) {
		revs, _ := revisions(t, stack)
		return len(revs) > 0 && revs[0] >= rev, fmt.Sprintf("revisions %v", revs)
	})
}

// checkEpochs fails unless every epoch stamped on a write the daemon
// received belongs to one controller only, and returns them by controller.
func checkEpochs(t *testing.T, members ...*haMember) map[string]map[string]bool {
	t.Helper()
	owner := map[string]string{}
	by := map[string]map[string]bool{}
	for _, m := range members {
		by[m.id] = map[string]bool{}
		for _, w := range m.proxy.log() {
			if !w.Forwarded || w.Kind == "lease" || w.Op == "remove" {
				continue
			}
			if w.Epoch == "" {
				t.Errorf("%s wrote %s %s %s without an epoch label", m.id, w.Op, w.Kind, w.Name)
				continue
			}
			if o, ok := owner[w.Epoch]; ok && o != m.id {
				t.Errorf("epoch %s written by both %s and %s", w.Epoch, o, m.id)
			}
			owner[w.Epoch] = m.id
			by[m.id][w.Epoch] = true
		}
	}
	return by
}

// serviceUpdates counts, per service, the updates the daemon received
// since from, from every member.
func serviceUpdates(from time.Time, members ...*haMember) map[string]int {
	n := map[string]int{}
	for _, m := range members {
		for _, w := range m.proxy.log() {
			if w.Kind == "service" && w.Forwarded && w.Status < 300 && !w.At.Before(from) {
				n[w.Name]++
			}
		}
	}
	return n
}

func TestHAStandbyTakesOverFromALeaderKilledMidPassAndFinishesItOnce(t *testing.T) {
	t.Parallel()
	stack, repo, a, b := haSetup(t, "hakill")

	var diedAt atomic.Int64
	a.proxy.killAfterServiceWrite(2, func() {
		diedAt.Store(time.Now().UnixNano())
		_ = a.ctl.cmd.Process.Signal(syscall.SIGKILL)
	})
	changed := time.Now()
	repo.Commit("v2", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(haStackV, "v2")})
	if code, e := a.post(t, "/api/v1/applications/"+stack+"/sync"); code != http.StatusAccepted {
		t.Fatalf("sync on the leader: %d %+v", code, e)
	}
	select {
	case <-a.ctl.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the leader was never killed mid-pass")
	}
	// The takeover as the swarm records it: readiness waits for the new
	// leader's first passes too.
	led := waitLeaseHolder(t, stack, b.id, 4*haLease)
	took := led.Sub(time.Unix(0, diedAt.Load()))
	b.waitRole(t, "leader", "", 4*haLease)
	t.Logf("standby led %s after the leader was killed (lease %s)", took.Round(10*time.Millisecond), haLease)
	if took > 2*haLease {
		t.Errorf("the standby took %s to lead, more than two lease durations", took)
	}
	waitRevision(t, stack, 2, 60*time.Second)
	time.Sleep(haLease) // anything more the new leader would write, it writes now

	if revs, _ := revisions(t, stack); fmt.Sprint(revs) != "[2 1]" {
		t.Fatalf("revisions %v, want [2 1]: no gap, no duplicate", revs)
	}
	updates := serviceUpdates(changed, a, b)
	for _, svc := range []string{"one", "two", "three"} {
		if n := updates[stack+"_"+svc]; n != 1 {
			t.Errorf("service %s written %d times for one change, want once", svc, n)
		}
	}
	t.Logf("service writes for the change: %v", updates)
	by := checkEpochs(t, a, b)
	// a wrote in epoch 1 only; b in 2, and in later ones only if a slow
	// daemon cost it the lease and it took it back.
	if !by[a.id]["1"] || len(by[a.id]) != 1 || !by[b.id]["2"] || by[b.id]["1"] {
		t.Errorf("epochs written: %v; want the killed leader in 1 and the new one from 2 on", by)
	}
	if _, epochs := revisions(t, stack); epochs[1] != "1" || epochs[2] == "1" || epochs[2] == "" {
		t.Errorf("record epochs %v, want revision 1 in epoch 1, revision 2 in a later one", epochs)
	}
	rd, _ := b.readiness(t)
	out, code := cli{t: t, bin: flotillaBinary(t), env: []string{"FLOTILLA_SERVER=" + b.url}}.run("status")
	if !strings.Contains(out, fmt.Sprintf("(leader, epoch %d)", rd.Epoch)) || rd.Epoch < 2 {
		t.Errorf("flotilla status on the new leader (exit %d):\n%s", code, out)
	}
	if code, _ := b.ctl.stop(syscall.SIGTERM, stopDeadline); code != 0 {
		t.Errorf("the new leader exited %d on SIGTERM", code)
	}
}

func TestHAPartitionedLeaderStopsWritingBeforeTheStandbyTakesOver(t *testing.T) {
	t.Parallel()
	stack, repo, a, b := haSetup(t, "hacut")

	repo.Commit("v2", map[string]string{"deploy/docker-compose.yml": fmt.Sprintf(haStackV, "v2")})
	if code, e := a.post(t, "/api/v1/applications/"+stack+"/sync"); code != http.StatusAccepted {
		t.Fatalf("sync on the leader: %d %+v", code, e)
	}
	cutAt := time.Now()
	a.proxy.cut(true)
	b.waitRole(t, "leader", "", 4*haLease)
	waitRevision(t, stack, 2, 60*time.Second)
	a.proxy.cut(false) // the network recovers: whatever a still sends is delivered
	time.Sleep(haLease)
	a.waitRole(t, "standby", b.id, 4*haLease)

	var aLast, bFirst time.Time
	heldSent, heldDelivered := 0, 0
	for _, w := range a.proxy.log() {
		if w.Kind == "lease" || w.At.Before(cutAt) {
			continue
		}
		heldSent++
		if w.Forwarded {
			heldDelivered++
		}
		if w.At.After(aLast) {
			aLast = w.At
		}
	}
	for _, w := range b.proxy.log() {
		if w.Kind != "lease" && w.Forwarded && (bFirst.IsZero() || w.At.Before(bFirst)) {
			bFirst = w.At
		}
	}
	if bFirst.IsZero() {
		t.Fatal("the new leader wrote nothing")
	}
	last := "none"
	if !aLast.IsZero() {
		last = aLast.Sub(cutAt).Round(time.Millisecond).String() + " after the cut"
	}
	t.Logf("cut leader: %d writes attempted after the cut, %d delivered; last attempt %s; the other's first write %s after the cut",
		heldSent, heldDelivered, last, bFirst.Sub(cutAt).Round(time.Millisecond))
	if !aLast.IsZero() && !aLast.Before(bFirst) {
		t.Errorf("the cut leader attempted a write %s after the other's first write", aLast.Sub(bFirst))
	}
	if heldDelivered != 0 {
		t.Errorf("%d writes of the cut leader reached the daemon once the network recovered", heldDelivered)
	}
	if !strings.Contains(a.ctl.logs.String(), "writing stopped") {
		t.Error("the cut leader never logged that it stopped writing")
	}
	updates := serviceUpdates(cutAt, a, b)
	for _, svc := range []string{"one", "two", "three"} {
		if n := updates[stack+"_"+svc]; n != 1 {
			t.Errorf("service %s written %d times for one change, want once", svc, n)
		}
	}
	if revs, _ := revisions(t, stack); fmt.Sprint(revs) != "[2 1]" {
		t.Fatalf("revisions %v, want [2 1]", revs)
	}
	checkEpochs(t, a, b)
}
