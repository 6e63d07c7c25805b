package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// The rollout tests below run the whole chain as operators run it: the
// built controller, Traefik as a swarm service of its own stack (deployed
// with `docker stack deploy`, polling the controller's API with a read
// token), the application's stack on an overlay network the two share, and
// a client sending requests through Traefik's published port all along.
// The stable service and its colour use endpoint_mode dnsrr because this
// kernel has no IPVS: a virtual IP does not forward here, task addresses do.

// traefikImage is the image scripts/traefik.sh imports.
const traefikImage = "flotilla-test/traefik:v3.7.13"

// edge is one router stack, one application and the controller between.
type edge struct {
	t                 *testing.T
	app, routerStack  string
	network, host     string
	web, metrics, api string // Traefik's published ports, host side
	repo              *gittest.Repo
	appsFile, data    string
	listen            string
	admin, read       string
	ctl               *stoppable
	// http reaches the daemon's host network: the controller's API and
	// Traefik's published ports.
	http *http.Client
}

func randomToken(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// gatewayAddr is an address of the daemon's host that a task on an
// overlay network reaches: the docker_gwbridge gateway, with a port free on
// that host's loopback (the controller runs where the daemon's host network
// is: see swarmtest.Command).
func gatewayAddr(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("docker", "network", "inspect", "docker_gwbridge", "--format", "{{range .IPAM.Config}}{{.Gateway}}{{end}}").CombinedOutput()
	gw := strings.TrimSpace(string(out))
	if err != nil || net.ParseIP(gw) == nil {
		t.Fatalf("the docker_gwbridge gateway: %v %s", err, out)
	}
	return net.JoinHostPort(gw, strconv.Itoa(freePort(t)))
}

// routerStackFile is the router stack of examples/rollout, which
// docs/rollouts.md gives users; this test deploys it as it is, with its
// variables set for this machine.
const routerStackFile = "../examples/rollout/router.yaml"

// createEdgeNetwork makes the network router.yaml names as external, as
// an operator does (docker network create --driver overlay), labelled with
// owner's namespace so that the cleanup of that stack removes it once every
// service has left it.
func createEdgeNetwork(t *testing.T, name, owner string) {
	t.Helper()
	if out, err := exec.Command("docker", "network", "create", "--driver", "overlay",
		"--label", "com.docker.stack.namespace="+owner, name).CombinedOutput(); err != nil {
		t.Fatalf("docker network create %s: %v\n%s", name, err, out)
	}
}

// newEdge deploys the router, polling the controller every poll.
func newEdge(t *testing.T, poll time.Duration) *edge {
	t.Helper()
	e := &edge{t: t, app: swarmtest.Name(t, "edge"), repo: gittest.New(t),
		web: strconv.Itoa(freePort(t)), metrics: strconv.Itoa(freePort(t)), api: strconv.Itoa(freePort(t)),
		admin: randomToken(t), read: randomToken(t), listen: gatewayAddr(t), data: filepath.Join(t.TempDir(), "data"),
		http: swarmtest.HTTPClient(10 * time.Second)}
	e.routerStack, e.network, e.host = e.app+"-router", e.app+"-edge", e.app+".test"
	// Cleanups run last first: the application leaves the network
	// before the router's stack removes it.
	swarmtest.Cleanup(t, e.routerStack)
	swarmtest.Cleanup(t, e.app)

	createEdgeNetwork(t, e.network, e.routerStack)
	deploy := exec.Command("docker", "stack", "deploy", "-c", routerStackFile, e.routerStack)
	deploy.Env = append(os.Environ(), "TRAEFIK_IMAGE="+traefikImage, "FLOTILLA_URL=http://"+e.listen,
		"FLOTILLA_READ_TOKEN="+e.read, "WEB_PORT="+e.web, "METRICS_PORT="+e.metrics, "API_PORT="+e.api, "EDGE_NETWORK="+e.network, "POLL="+poll.String())
	if out, err := deploy.CombinedOutput(); err != nil {
		t.Fatalf("docker stack deploy the router: %v\n%s", err, out)
	}
	e.appsFile = writeFile(t, fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s
    source: {repoURL: %[2]s, revision: main, path: deploy}
    syncPolicy: {automated: {}, interval: 1m}
    allow: {networks: [%[3]s], analysisURLs: ["http://127.0.0.1:%[4]s/metrics"]}
`, e.app, e.repo.Dir, e.network, e.metrics))
	return e
}

// start runs the built controller on the gateway address with the
// tokens, where the daemon's host network is (in the engine's namespace
// for a current engine, so that the gateway and Traefik's published ports
// are its own); the data directory is the same across restarts.
func (e *edge) start() {
	e.t.Helper()
	cmd := swarmtest.Command(flotillaBinary(e.t), "controller", "--config", e.appsFile, "--data", e.data,
		"--controller-id", "edge-"+e.app, "--listen", e.listen, "--log-level", "debug")
	cmd.Env = append(os.Environ(), "FLOTILLA_ADMIN_TOKEN="+e.admin, "FLOTILLA_READ_TOKEN="+e.read)
	e.ctl = startProcess(e.t, cmd)
}

// call makes an admin request to the controller's API and decodes its
// JSON answer into out, if given.
func (e *edge) call(method, path string, out any) {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://"+e.listen+path, strings.NewReader("{}"))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("X-Flotilla-Request", "1")
	req.Header.Set("Content-Type", "application/json")
	res, err := e.http.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode >= 300 {
		e.t.Fatalf("%s %s: %s %s", method, path, res.Status, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			e.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// answer is one response the client saw through Traefik.
type answer struct {
	at      time.Time
	code    int
	version string // the APP_MESSAGE of the task that answered; "" when no task did
}

// loadClient sends requests through Traefik's web entry point, one after the
// other, until stopped, and keeps every answer.
type loadClient struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	done    chan struct{}
}

func (e *edge) get(c *http.Client) answer {
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+e.web+"/", nil)
	req.Host = e.host
	a := answer{at: time.Now()}
	res, err := c.Do(req)
	if err != nil {
		return a
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	res.Body.Close()
	a.code = res.StatusCode
	if f := strings.Fields(string(body)); len(f) == 3 && f[0] == "ok" {
		a.version = f[2]
	}
	return a
}

func (e *edge) startClient() *loadClient {
	c := &loadClient{stop: make(chan struct{}), done: make(chan struct{})}
	hc := swarmtest.HTTPClient(10 * time.Second)
	go func() {
		defer close(c.done)
		tick := time.NewTicker(20 * time.Millisecond) // 50 requests a second at most
		defer tick.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
			a := e.get(hc)
			c.mu.Lock()
			c.answers = append(c.answers, a)
			c.mu.Unlock()
		}
	}()
	e.t.Cleanup(c.halt)
	return c
}

func (c *loadClient) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

func (c *loadClient) since(t time.Time) []answer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []answer
	for _, a := range c.answers {
		if !a.at.Before(t) {
			out = append(out, a)
		}
	}
	return out
}

// waitServing waits until the client's answers come from version.
func (e *edge) waitServing(c *loadClient, version string) {
	e.t.Helper()
	from := time.Now()
	swarmtest.Eventually(e.t, 3*time.Minute, func() (bool, string) {
		as := c.since(from)
		if len(as) == 0 {
			return false, "no answer yet"
		}
		last := as[len(as)-1]
		return last.code == http.StatusOK && last.version == version, fmt.Sprintf("last answer %d %q", last.code, last.version)
	})
}

// weights is the split Traefik itself routes by, from its API: backend
// (stable, canary, preview) to weight; nil while it has no such route.
func (e *edge) weights(service string) map[string]int {
	route := e.app + "-" + service
	res, err := e.http.Get("http://127.0.0.1:" + e.api + "/api/http/services/" + route + "@http")
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil
	}
	var svc struct {
		Weighted struct {
			Services []struct {
				Name   string `json:"name"`
				Weight *int   `json:"weight"`
			} `json:"services"`
		} `json:"weighted"`
	}
	if err := json.NewDecoder(res.Body).Decode(&svc); err != nil {
		e.t.Fatalf("traefik's service %s: %v", route, err)
	}
	w := map[string]int{}
	for _, s := range svc.Weighted.Services {
		name := strings.TrimSuffix(s.Name, "@http")
		name = name[strings.LastIndexByte(name, '.')+1:]
		if s.Weight != nil {
			w[name] = *s.Weight
		} else {
			w[name] = 1
		}
	}
	return w
}

// state is the rollout record on the extra colour's labels, or the zero
// State while there is no colour.
func (e *edge) state(colour string) rollout.State {
	e.t.Helper()
	for _, s := range stackServices(e.t, e.app) {
		if s.Spec.Name == e.app+"_"+colour {
			st, err := rollout.StateFromLabels(s.Spec.Labels)
			if err != nil {
				e.t.Fatal(err)
			}
			return st
		}
	}
	return rollout.State{}
}

// weightLog records the canary's weight as Traefik reports it, with when
// each value was first seen.
type weightLog struct {
	mu      sync.Mutex
	changes []weightChange
}

type weightChange struct {
	at     time.Time
	weight int // -1: no route
}

func (c weightChange) String() string {
	return fmt.Sprintf("%s→%d", c.at.Format("15:04:05.0"), c.weight)
}

func (e *edge) watchWeights(service, backend string) (*weightLog, func()) {
	l := &weightLog{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			w := -1
			if ws := e.weights(service); ws != nil {
				w = ws[backend]
			}
			l.mu.Lock()
			if n := len(l.changes); n == 0 || l.changes[n-1].weight != w {
				l.changes = append(l.changes, weightChange{time.Now(), w})
			}
			l.mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); <-done }) }
	e.t.Cleanup(halt)
	return l, halt
}

func (l *weightLog) snapshot() []weightChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]weightChange(nil), l.changes...)
}

func (l *weightLog) current() int {
	s := l.snapshot()
	if len(s) == 0 {
		return -1
	}
	return s[len(s)-1].weight
}

// stage is one version of the application's stack file.
type stage struct {
	version, status string
	canary          string // the rollout key's body
}

func (e *edge) stackFile(s stage) string {
	return fmt.Sprintf(`version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    command: ["serve", ":8080"]
    environment: {APP_MESSAGE: %[1]s, APP_STATUS: "%[2]s"}
    stop_grace_period: 2s
    networks: [edge]
    deploy:
      replicas: 2
      endpoint_mode: dnsrr
    x-flotilla:
      rollout:
%[3]s
        router: {provider: traefik, rule: "Host(`+"`%[4]s`"+`)", entryPoints: [web], port: 8080}
networks:
  edge: {external: true, name: %[5]s}
`, s.version, s.status, s.canary, e.host, e.network)
}

func (e *edge) commit(s stage) {
	e.repo.Commit(s.version, map[string]string{"deploy/compose.yaml": e.stackFile(s)})
	// A webhook-free controller finds the commit at its interval; a
	// refresh makes it look now, as an operator would.
	e.call(http.MethodPost, "/api/v1/applications/"+e.app+"/sync", nil)
}

// share counts the answers between from and to (an answer's start), and
// how many came from version, failed (no 200) or came from no task.
type share struct{ n, of, failed int }

func count(as []answer, from, to time.Time, version string) share {
	var s share
	for _, a := range as {
		if a.at.Before(from) || !a.at.Before(to) {
			continue
		}
		s.n++
		if a.version == version {
			s.of++
		}
		if a.code != http.StatusOK {
			s.failed++
		}
	}
	return s
}

// tolerance is how far a count of n requests at share p may stray from
// n*p: four standard deviations of a binomial count, and three requests
// for the edges of the window (Traefik's weighted round robin is in fact
// far more even than chance).
func tolerance(n int, p float64) float64 {
	return 4*math.Sqrt(float64(n)*p*(1-p)) + 3
}

func canaryRollout(metrics string) string {
	return `        strategy: canary
        steps: [{weight: 20, pause: 20s}, {weight: 60, pause: 20s}]
        analysis:
          interval: 5s
          maxErrorRatio: 0.05
          minRequests: 10
          traefik: {metrics: "http://127.0.0.1:` + metrics + `/metrics"}
        scaleDownDelay: 3s`
}

// TestCanaryThroughTraefikOnTheSwarm: a healthy canary gets the share of
// requests each step names and is promoted; a canary that answers 500s is
// aborted within an analysis interval and every request goes back to
// stable; a controller killed with SIGKILL mid-rollout is restarted and
// carries on from the recorded step, never from the first and never by
// sending everything to the unverified version.
func TestCanaryThroughTraefikOnTheSwarm(t *testing.T) {
	t.Parallel()
	e := newEdge(t, time.Second)
	spec := canaryRollout(e.metrics)
	e.repo.Commit("v1", map[string]string{"deploy/compose.yaml": e.stackFile(stage{"v1", "200", spec})})
	e.start()
	c := e.startClient()
	e.waitServing(c, "v1")
	weights, _ := e.watchWeights("web", "canary")

	// v2, healthy: every step's share, measured on what the client got
	// while Traefik reported the step's weight.
	from := time.Now()
	e.commit(stage{"v2", "200", spec})
	// From the promote on, the stable service is updated to v2 too:
	// the shares are measured before it.
	var promoted time.Time
	swarmtest.Eventually(t, 5*time.Minute, func() (bool, string) {
		st := e.state("web-canary")
		if promoted.IsZero() && (st.Phase == rollout.Promoting || st.Phase == rollout.Completed) {
			promoted = time.Now()
		}
		return st.Phase == rollout.Completed && weights.current() == 0, fmt.Sprintf("%+v, traefik %d", st, weights.current())
	})
	e.waitServing(c, "v2")
	answers := c.since(from)
	changes := weights.snapshot()
	measured := map[int]share{}
	for i, ch := range changes {
		if ch.at.Before(from) || (ch.weight != 20 && ch.weight != 60) || i+1 == len(changes) {
			continue
		}
		// Traefik's API may show a configuration a moment before its
		// entry point routes by it, and the watcher polls every 100 ms.
		end := changes[i+1].at
		if promoted.Before(end) {
			end = promoted
		}
		s := count(answers, ch.at.Add(time.Second), end.Add(-500*time.Millisecond), "v2")
		measured[ch.weight] = s
		t.Logf("canary weight %d%%: %d of %d requests reached v2, %d failed", ch.weight, s.of, s.n, s.failed)
		p := float64(ch.weight) / 100
		if s.n < 100 {
			t.Fatalf("weight %d: only %d requests measured", ch.weight, s.n)
		}
		if d := math.Abs(float64(s.of) - p*float64(s.n)); d > tolerance(s.n, p) || s.failed > 0 {
			t.Fatalf("weight %d: %d of %d requests reached the canary (want %.0f ± %.0f), %d failed", ch.weight, s.of, s.n, p*float64(s.n), tolerance(s.n, p), s.failed)
		}
	}
	if len(measured) != 2 {
		t.Fatalf("steps measured %v; Traefik's canary weights were %v", measured, changes)
	}

	// v3 answers 500: aborted within one interval of the first error.
	e.commit(stage{"v3", "500", spec})
	var firstError time.Time
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		for _, a := range c.since(from) {
			if a.code == http.StatusInternalServerError {
				firstError = a.at
				return true, ""
			}
		}
		return false, "no 500 yet: " + fmt.Sprintf("%+v", e.state("web-canary"))
	})
	var aborted time.Time
	swarmtest.Eventually(t, time.Minute, func() (bool, string) {
		st := e.state("web-canary")
		aborted = time.Now()
		return st.Phase == rollout.Aborted, fmt.Sprintf("%+v", st)
	})
	took := aborted.Sub(firstError)
	t.Logf("aborted %v after the first 500 (analysis interval 5s)", took.Round(100*time.Millisecond))
	if took > 5*time.Second+4*time.Second {
		t.Fatalf("aborted %v after the first error; the interval is 5s", took)
	}
	st := e.state("web-canary")
	if st.Metric == "" || !strings.Contains(st.Reason, "analysis failed") {
		t.Fatalf("abort record %+v names no metric", st)
	}
	var a struct{ Health, HealthMessage string }
	e.call(http.MethodGet, "/api/v1/applications/"+e.app, &a)
	if a.Health != "Degraded" {
		t.Fatalf("health after the abort: %+v", a)
	}
	swarmtest.Eventually(t, time.Minute, func() (bool, string) {
		return weights.current() == 0, fmt.Sprintf("traefik's canary weight %d", weights.current())
	})
	back := time.Now().Add(time.Second)
	swarmtest.Eventually(t, time.Minute, func() (bool, string) {
		s := count(c.since(back), back, time.Now(), "v2")
		return s.n >= 100, fmt.Sprintf("%d requests", s.n)
	})
	if s := count(c.since(back), back, time.Now(), "v2"); s.of != s.n || s.failed != 0 {
		t.Fatalf("after the abort %d of %d requests reached stable v2, %d failed", s.of, s.n, s.failed)
	}

	// v4, healthy; the controller is killed at the second step.
	e.commit(stage{"v4", "200", spec})
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		st := e.state("web-canary")
		return st.Revision != "" && st.Phase == rollout.Progressing && st.Step == 1 && weights.current() == 60,
			fmt.Sprintf("%+v, traefik %d", st, weights.current())
	})
	before := e.state("web-canary")
	if err := e.ctl.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-e.ctl.exited
	killed := time.Now()
	e.start()
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		st := e.state("web-canary")
		if st.Revision == before.Revision && st.Phase == rollout.Progressing && st.Step < before.Step {
			t.Fatalf("the restarted controller moved the rollout back: %+v → %+v", before, st)
		}
		return st.Phase == rollout.Completed, fmt.Sprintf("%+v", st)
	})
	e.waitServing(c, "v4")
	for _, ch := range weights.snapshot() {
		if ch.at.After(killed) && ch.weight != 60 && ch.weight != 0 {
			t.Fatalf("after the kill Traefik's canary weight went to %d: %v", ch.weight, weights.snapshot())
		}
	}
	s := count(c.since(killed), killed, time.Now(), "")
	t.Logf("from the kill to the end of the rollout: %d requests, %d failed", s.n, s.failed)
}

// TestBlueGreenSwitchThroughTraefikFailsNoRequest: the preview runs at
// full size with no traffic, all traffic switches to it, the stable service
// is updated behind it, and traffic comes back to stable, with a client
// looping through Traefik all along and not one request failing.
func TestBlueGreenSwitchThroughTraefikFailsNoRequest(t *testing.T) {
	t.Parallel()
	// Traefik's default poll, and the default scale-down delay: with the
	// preview scaled to zero as traffic left it, 9 of 2,447 requests
	// failed (502) in the second after the switch back.
	e := newEdge(t, 5*time.Second)
	const spec = `        strategy: blueGreen
        preview: {pause: 5s}
        rollbackWindow: 10s`
	e.repo.Commit("v1", map[string]string{"deploy/compose.yaml": e.stackFile(stage{"v1", "200", spec})})
	e.start()
	c := e.startClient()
	e.waitServing(c, "v1")
	weights, _ := e.watchWeights("web", "preview")
	from := time.Now()
	e.commit(stage{"v2", "200", spec})
	var phases []string
	last := rollout.Phase("")
	swarmtest.Eventually(t, 5*time.Minute, func() (bool, string) {
		st := e.state("web-preview")
		if st.Phase != last {
			last = st.Phase
			phases = append(phases, time.Now().Format("15:04:05.0")+" "+string(st.Phase))
		}
		return st.Phase == rollout.Completed, fmt.Sprintf("%+v", st)
	})
	// Traffic has left the preview; its tasks stay for the scale-down
	// delay, while Traefik, polling every 5s, still sends it requests.
	if st := e.state("web-preview"); st.ScaleDownAt.IsZero() || time.Until(st.ScaleDownAt) < 10*time.Second {
		t.Fatalf("completed with the preview's scale-down at %v, want about 30s from now", st.ScaleDownAt)
	}
	for _, s := range stackServices(t, e.app) {
		if r := s.Spec.Mode.Replicated.Replicas; s.Spec.Name == e.app+"_web-preview" && (r == nil || *r != 2) {
			t.Fatalf("the preview was scaled to %v as traffic left it", r)
		}
	}
	e.waitServing(c, "v2")
	// Traffic is back on stable for good once the preview is at zero.
	swarmtest.Eventually(t, time.Minute, func() (bool, string) {
		for _, s := range stackServices(t, e.app) {
			if s.Spec.Name == e.app+"_web-preview" {
				r := s.Spec.Mode.Replicated.Replicas
				return r != nil && *r == 0, fmt.Sprintf("preview at %d replicas", *r)
			}
		}
		return false, "no preview service"
	})
	swarmtest.Eventually(t, time.Minute, func() (bool, string) {
		return weights.current() == 0, fmt.Sprintf("traefik's preview weight %d", weights.current())
	})
	// A few seconds more: the preview's tasks stop after the router let
	// go of them, or requests fail here.
	end := time.Now().Add(5 * time.Second)
	swarmtest.Eventually(t, time.Minute, func() (bool, string) { return time.Now().After(end), "" })
	s := count(c.since(from), from, end, "v2")
	t.Logf("blue/green phases %v; Traefik's preview weights %v; %d requests, %d failed", phases, weights.snapshot(), s.n, s.failed)
	if s.failed != 0 {
		for _, a := range c.since(from) {
			if a.code != http.StatusOK {
				t.Logf("failed at %s: %d %q", a.at.Format("15:04:05.000"), a.code, a.version)
			}
		}
		t.Fatalf("%d of %d requests failed during the blue/green rollout", s.failed, s.n)
	}
	switched := false
	for _, ch := range weights.snapshot() {
		switched = switched || ch.weight == 100
	}
	if !switched || s.n < 200 {
		t.Fatalf("the preview never took all traffic (%v) or too few requests (%d)", weights.snapshot(), s.n)
	}
}

// TestACommitDuringABlueGreenSwitchDrainsThroughTraefikFailsNoRequest: a
// commit lands while all traffic is switched to the preview. Traffic goes
// back to the stable service at once, but Traefik, polling every 15s, still
// sends requests to the preview until its next poll: the preview keeps the
// switched revision's tasks until then (Superseded), and only after the
// scale-down delay takes the new revision, which gets no request before a
// switch of its own. Not one request fails and none reaches the new
// revision.
func TestACommitDuringABlueGreenSwitchDrainsThroughTraefikFailsNoRequest(t *testing.T) {
	t.Parallel()
	// A slow poll gives the swarm time to replace the preview's tasks
	// before Traefik lets go of them: re-specified in the pass that takes
	// its traffic, the preview answered as v3 here.
	e := newEdge(t, 15*time.Second)
	const spec = `        strategy: blueGreen
        preview: {pause: 5s}
        rollbackWindow: 10m
        scaleDownDelay: 40s`
	// The new revision's preview waits for an operator, so any answer
	// from it during the test is a request it should never have had.
	const held = `        strategy: blueGreen
        preview: {pause: 0s}
        rollbackWindow: 10m
        scaleDownDelay: 40s`
	e.repo.Commit("v1", map[string]string{"deploy/compose.yaml": e.stackFile(stage{"v1", "200", spec})})
	e.start()
	c := e.startClient()
	e.waitServing(c, "v1")
	weights, _ := e.watchWeights("web", "preview")
	e.commit(stage{"v2", "200", spec})
	swarmtest.Eventually(t, 5*time.Minute, func() (bool, string) {
		st := e.state("web-preview")
		return st.Phase == rollout.Switched && weights.current() == 100, fmt.Sprintf("%+v, traefik %d", st, weights.current())
	})
	e.waitServing(c, "v2")

	from := time.Now()
	e.commit(stage{"v3", "200", held})
	var superseded rollout.State
	swarmtest.Eventually(t, 2*time.Minute, func() (bool, string) {
		st := e.state("web-preview")
		if st.Phase == rollout.Superseded {
			superseded = st
		}
		return st.Phase == rollout.Previewing && !st.StepStarted.IsZero(), fmt.Sprintf("%+v, traefik %d", st, weights.current())
	})
	// Some seconds more of the new preview holding with no traffic.
	end := time.Now().Add(5 * time.Second)
	swarmtest.Eventually(t, time.Minute, func() (bool, string) { return time.Now().After(end), "" })
	answers := c.since(from)
	s := count(answers, from, end, "v3")
	byVersion := map[string]int{}
	for _, a := range answers {
		if !a.at.Before(end) {
			continue
		}
		byVersion[a.version]++
		if a.code != http.StatusOK {
			t.Logf("failed at %s: %d %q", a.at.Format("15:04:05.000"), a.code, a.version)
		}
	}
	t.Logf("from the commit to the new preview holding: %d requests %v, %d failed; Traefik's preview weights %v", s.n, byVersion, s.failed, weights.snapshot())
	if s.failed != 0 || s.of != 0 || s.n < 100 {
		t.Fatalf("%d of %d requests failed and %d reached the unverified v3 (want none of either, and at least 100 requests)", s.failed, s.n, s.of)
	}
	if byVersion["v1"] == 0 {
		t.Fatalf("traffic never went back to stable v1: %v", byVersion)
	}
	if superseded.Phase == "" {
		t.Fatalf("the preview was never recorded Superseded; Traefik's weights %v", weights.snapshot())
	}
}
