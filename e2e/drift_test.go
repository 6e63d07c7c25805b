package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// changeService edits a live service the way `docker service update` does:
// read, change, write with the version read, retrying when Swarm's own
// bookkeeping moved the version in between.
func changeService(t *testing.T, h *harness, name string, edit func(*swarm.ServiceSpec)) {
	t.Helper()
	c := swarmtest.Client(t)
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		s, err := c.ServiceInspect(ctx, h.app.Stack+"_"+name, client.ServiceInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edit(&s.Service.Spec)
		_, err = c.ServiceUpdate(ctx, s.Service.ID, client.ServiceUpdateOptions{Version: s.Service.Version, Spec: s.Service.Spec})
		if err == nil {
			return
		}
		if attempt > 5 || !strings.Contains(err.Error(), "out of sequence") {
			t.Fatal(err)
		}
	}
}

func driftFields(st application.Status) []string {
	var out []string
	for _, d := range st.Drift {
		out = append(out, d.Service+":"+d.Field)
	}
	return out
}

func TestDriftIsReportedAndHealedOnlyWithSelfHeal(t *testing.T) {
	t.Parallel()
	h, ctl := running(t)

	// An untouched stack reports no drift.
	res := h.reconcile(ctl)
	if res.Err != nil || len(res.Status.Drift) != 0 || res.Status.Sync != application.Synced {
		t.Fatalf("untouched stack: %v %v", res.Err, driftFields(res.Status))
	}

	// Someone changes the worker's environment by hand.
	changeService(t, h, "worker", func(s *swarm.ServiceSpec) {
		s.TaskTemplate.ContainerSpec.Env = append(s.TaskTemplate.ContainerSpec.Env, "DEBUG=1", "API_TOKEN=leaked")
	})
	h.waitRunning(3)
	// Drift is judged on settled services; the hand-made update may still
	// be rolling out when the first pass looks, so passes repeat until it
	// settles, as the controller's interval would.
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		res = h.reconcile(ctl)
		return res.Err == nil && len(res.Status.Drift) > 0, fmt.Sprint(res.Err, driftFields(res.Status))
	})
	got := driftFields(res.Status)
	var before map[string]uint64
	if !slices.Equal(got, []string{"worker:env.API_TOKEN", "worker:env.DEBUG"}) {
		t.Fatalf("drift %v, want worker env.API_TOKEN and env.DEBUG", got)
	}
	for _, d := range res.Status.Drift {
		if d.Field == "env.API_TOKEN" && (!d.Masked || strings.Contains(d.Live, "leaked")) {
			t.Fatalf("secret-looking env value not masked: %+v", d)
		}
	}
	if res.Status.Sync != application.OutOfSync || res.Status.SyncReason != application.ReasonDrift {
		t.Fatalf("sync %s/%s, want OutOfSync/drift", res.Status.Sync, res.Status.SyncReason)
	}
	// Another pass without selfHeal reports the same drift and writes
	// nothing: versions taken once the hand-made update settled stay put.
	before = versions(h.services())
	res = h.reconcile(ctl)
	if got := driftFields(res.Status); !slices.Equal(got, []string{"worker:env.API_TOKEN", "worker:env.DEBUG"}) {
		t.Fatalf("drift on the next pass %v", got)
	}
	if !maps.Equal(before, versions(h.services())) {
		t.Fatal("drift was corrected without selfHeal")
	}

	// With selfHeal the next pass corrects exactly that service.
	h.app.SyncPolicy.Automated.SelfHeal = true
	ctl = h.controller(false)
	res = h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	after := versions(h.services())
	for _, n := range []string{"web", "cron"} {
		if after[n] != before[n] {
			t.Fatalf("%s touched by self-heal", n)
		}
	}
	if after["worker"] == before["worker"] {
		t.Fatal("worker not healed")
	}
	env := h.services()["worker"].Spec.TaskTemplate.ContainerSpec.Env
	if slices.Contains(env, "DEBUG=1") {
		t.Fatalf("worker env still drifted: %v", env)
	}
	h.waitRunning(3)
	res = h.reconcile(ctl)
	if res.Err != nil || len(res.Status.Drift) != 0 || res.Status.Sync != application.Synced {
		t.Fatalf("after heal: %v %v %s", res.Err, driftFields(res.Status), res.Status.Sync)
	}

	// A deleted service is drift too, and self-heal brings it back.
	if _, err := swarmtest.Client(t).ServiceRemove(context.Background(), h.services()["cron"].ID, client.ServiceRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	res = h.reconcile(ctl)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, ok := h.services()["cron"]; !ok {
		t.Fatalf("deleted service not restored: %v", driftFields(res.Status))
	}
}

// daemonSocket stands between the backend and the daemon: a unix socket
// that forwards to Docker's, and that can be taken away and brought back.
// Killing the shared dockerd would break every other test running beside
// this one; losing the socket is the same thing to the controller — its
// requests fail at the transport — without touching the daemon.
type daemonSocket struct {
	t    *testing.T
	path string
	mu   sync.Mutex
	ln   net.Listener
	open map[net.Conn]bool
}

func newDaemonSocket(t *testing.T) *daemonSocket {
	d := &daemonSocket{t: t, path: filepath.Join(t.TempDir(), "docker.sock"), open: map[net.Conn]bool{}}
	d.up()
	t.Cleanup(d.down)
	return d
}

// up starts forwarding.
func (d *daemonSocket) up() {
	ln, err := net.Listen("unix", d.path)
	if err != nil {
		d.t.Fatal(err)
	}
	d.mu.Lock()
	d.ln = ln
	d.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go d.forward(c)
		}
	}()
}

func (d *daemonSocket) forward(c net.Conn) {
	up, err := net.Dial("unix", swarmtest.Socket())
	if err != nil {
		c.Close()
		return
	}
	d.mu.Lock()
	d.open[c], d.open[up] = true, true
	d.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
}

// down closes the socket and every connection through it.
func (d *daemonSocket) down() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ln != nil {
		d.ln.Close()
		d.ln = nil
	}
	for c := range d.open {
		c.Close()
	}
	d.open = map[net.Conn]bool{}
	_ = os.Remove(d.path)
}

func TestUnreachableDaemonIsUnknownAndRecovers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.repo.Commit("initial", files(stackFile))
	sock := newDaemonSocket(t)
	be, err := backend.New(context.Background(), backend.Options{Host: "unix://" + sock.path, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := reconcile.New(reconcile.Options{ControllerID: h.id, Backend: be, Fetcher: h.controllerFetcher(), Logger: quiet},
		[]application.Application{h.app})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := ctl.Reconcile(context.Background(), h.app.Name); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(3)

	sock.down()
	res, _ := ctl.Reconcile(context.Background(), h.app.Name)
	if res.Status.Health != application.HealthUnknown {
		t.Fatalf("daemon gone: health %s (%s), want Unknown", res.Status.Health, res.Status.HealthMessage)
	}
	for _, s := range res.Status.Services {
		if s.Health == application.Missing {
			t.Fatalf("daemon gone: service %s reported Missing", s.Name)
		}
	}
	sock.up()
	swarmtest.Eventually(t, 30*time.Second, func() (bool, string) {
		res, _ = ctl.Reconcile(context.Background(), h.app.Name)
		return res.Status.Health == application.Healthy, string(res.Status.Health) + ": " + res.Status.HealthMessage
	})
}

// `docker stack rm` behind the controller's back removes the configs and
// secrets the manifest mounts too. The next pass must report that as drift
// (not fail converting the manifest against a swarm that lacks them), and
// self-heal must bring the whole stack back.
func TestARemovedStackIsDriftAndSelfHealRestoresIt(t *testing.T) {
	t.Parallel()
	h, ctl := running(t)
	if err := h.backend.RemoveStack(context.Background(), h.app.Stack); err != nil {
		t.Fatal(err)
	}
	res := h.reconcile(ctl)
	if res.Err != nil {
		t.Fatalf("pass after the stack was removed: %v", res.Err)
	}
	if res.Status.SyncReason != application.ReasonDrift || len(res.Status.Drift) != 3 || len(h.services()) != 0 {
		t.Fatalf("without selfHeal: reason %q, drift %v, %d services", res.Status.SyncReason, driftFields(res.Status), len(h.services()))
	}

	h.app.SyncPolicy.Automated.SelfHeal = true
	res = h.reconcile(h.controller(false))
	if res.Err != nil || res.Healed == nil {
		t.Fatalf("self-heal: %v %+v", res.Err, res.Healed)
	}
	h.waitRunning(3)
}

// `docker stack rm` run behind the controller's back takes the stack's
// services, network, config and secret, and leaves the release records
// (they carry no namespace label). With selfHeal the next pass recreates
// every declared object, the way the first deploy did, and the services
// run again.
func TestDockerStackRmIsHealedBackWithItsNetworkConfigAndSecret(t *testing.T) {
	t.Parallel()
	h, _ := running(t)
	h.app.SyncPolicy.Automated.SelfHeal = true
	ctl := h.controller(false)
	ctx := context.Background()

	out, err := exec.CommandContext(ctx, "docker", "stack", "rm", h.app.Stack).CombinedOutput()
	if err != nil {
		t.Fatalf("docker stack rm: %v\n%s", err, out)
	}
	count := func() (n int, msg string) {
		for kind, list := range map[string]func(context.Context, string) (map[string]string, error){
			"networks": h.backend.LiveNetworks, "configs": h.backend.LiveConfigs, "secrets": h.backend.LiveSecrets,
		} {
			m, err := list(ctx, h.app.Stack)
			if err != nil {
				return -1, err.Error()
			}
			n += len(m)
			msg += fmt.Sprintf("%s %d ", kind, len(m))
		}
		return n, msg
	}
	// The network goes once the last task has let go of it.
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		n, msg := count()
		if n != 0 {
			// `docker stack rm` does not wait for tasks; a network
			// still in use is left behind, so remove it as a second
			// `docker stack rm` would.
			_ = exec.CommandContext(ctx, "docker", "stack", "rm", h.app.Stack).Run()
		}
		return n == 0 && len(h.services()) == 0, msg
	})

	res := h.reconcile(ctl)
	if res.Err != nil || res.Healed == nil {
		t.Fatalf("pass after docker stack rm: err %v, healed %+v", res.Err, res.Healed)
	}
	if n, msg := count(); n != 3 {
		t.Errorf("after the heal: %s; want the network, the config and the secret back", msg)
	}
	h.waitRunning(3)
	if res = h.reconcile(ctl); res.Err != nil || res.Healed != nil || len(res.Status.Drift) != 0 {
		t.Errorf("the pass after the heal: err %v, healed %+v, drift %v; want nothing to do", res.Err, res.Healed, driftFields(res.Status))
	}
}
