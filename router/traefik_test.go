package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/internal/traefiktest"
	"github.com/flotilla-gitops/flotilla/router"
)

// Against a real Traefik (FLOTILLA_TRAEFIK, built by scripts/traefik.sh):
// the configuration this package writes is what Traefik routes by, and the
// metrics it reads are the ones Traefik emits.

const appHost = "app.test"

// backend is a local server standing for one version of the application: it
// counts what it receives and answers 500 while fail is set.
type backend struct {
	name string
	srv  *httptest.Server
	hits atomic.Int64
	fail atomic.Bool
}

func newBackend(t *testing.T, name string) *backend {
	b := &backend{name: name}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		if b.fail.Load() {
			http.Error(w, name+" failing on demand", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// rig is a Traefik polling a ConfigServer, and the application's route.
type rig struct {
	t      *testing.T
	tr     *traefiktest.Traefik
	config router.ConfigServer
	probe  *httptest.Server
	gen    int
	client *http.Client
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, client: &http.Client{Timeout: 30 * time.Second}}
	r.probe = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(r.probe.Close)
	provider := httptest.NewServer(&r.config)
	t.Cleanup(provider.Close)
	r.tr = traefiktest.Start(t, provider.URL)
	t.Cleanup(r.client.CloseIdleConnections)
	return r
}

func appRoute(weights map[*backend]int) router.Route {
	rt := router.Route{Name: "app", Rule: "Host(`" + appHost + "`)", EntryPoints: []string{"web"}}
	for b, w := range weights {
		rt.Backends = append(rt.Backends, router.Backend{Name: b.name, Weight: w, URLs: []string{b.srv.URL}})
	}
	return rt
}

// apply serves routes and returns once Traefik routes by them. Each
// configuration carries a probe route of its own (a new Host), and Traefik
// swaps all its routers at once, so the probe answering proves the whole
// configuration is live. Traefik's API is not used for this: it is served
// by another entry point, whose routers Traefik switches separately, so it
// can show a configuration a moment before the web entry point routes by it.
func (r *rig) apply(routes ...router.Route) {
	r.t.Helper()
	r.gen++
	probeHost := fmt.Sprintf("probe-%d.test", r.gen)
	routes = append(routes, router.Route{
		Name: "probe", Rule: "Host(`" + probeHost + "`)", EntryPoints: []string{"web"},
		Backends: []router.Backend{{Name: "probe", Weight: 1, URLs: []string{r.probe.URL}}},
	})
	if err := r.config.Set(routes); err != nil {
		r.t.Fatal(err)
	}
	eventually(r.t, 60*time.Second, "traefik routes by configuration "+probeHost, func() bool {
		code, _, err := r.get(probeHost)
		return err == nil && code == http.StatusOK
	})
}

func (r *rig) get(host string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, r.tr.Web+"/", nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// send makes n requests to the application from 4 clients and fails the test
// on an error, or on any answer but wantCode unless it is 0.
func (r *rig) send(n int, wantCode int) {
	r.t.Helper()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan string, n)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				code, body, err := r.get(appHost)
				if err != nil || (wantCode != 0 && code != wantCode) {
					errs <- fmt.Sprintf("%d %q %v", code, body, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		r.t.Errorf("request through traefik: %s, want %d", e, wantCode)
	}
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// binomialTolerance is the smallest k with P(|X - np| > k) < 1e-6 for X
// binomial(n, p), from the exact distribution: a correct router that picked
// each request's backend at random would miss it less than once in a
// million runs. (Traefik's weighted round robin is deterministic, earliest
// deadline first, so it lands within a request or two; the test does not
// rely on that.)
func binomialTolerance(n int, p float64) int {
	if p == 0 || p == 1 {
		return 0
	}
	pmf := func(k int) float64 {
		lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
		return math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log(1-p))
	}
	mean := float64(n) * p
	for k := 0; k <= n; k++ {
		tail := 0.0
		for x := 0; x <= n; x++ {
			if math.Abs(float64(x)-mean) > float64(k) {
				tail += pmf(x)
			}
		}
		if tail < 1e-6 {
			return k
		}
	}
	return n
}

func TestTraefikSplitsTrafficByTheWeightsServed(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	a, b := newBackend(t, "a"), newBackend(t, "b")
	const n = 1000
	for _, step := range []struct{ wa, wb int }{{90, 10}, {50, 50}, {0, 100}} {
		r.apply(appRoute(map[*backend]int{a: step.wa, b: step.wb}))
		a.hits.Store(0)
		b.hits.Store(0)
		r.send(n, http.StatusOK)
		ga, gb := a.hits.Load(), b.hits.Load()
		if ga+gb != n {
			t.Fatalf("%d/%d: backends received %d+%d requests, want %d in all", step.wa, step.wb, ga, gb, n)
		}
		p := float64(step.wb) / float64(step.wa+step.wb)
		tol := binomialTolerance(n, p)
		want := int64(math.Round(n * p))
		t.Logf("weights %d/%d: a %d, b %d of %d (b expected %d ± %d)", step.wa, step.wb, ga, gb, n, want, tol)
		if gb < want-int64(tol) || gb > want+int64(tol) {
			t.Errorf("weights %d/%d: b received %d of %d, want %d ± %d", step.wa, step.wb, gb, n, want, tol)
		}
	}

	// Traefik accepted the weight-0 backend: the router and every service
	// are enabled, and the zero weight is still there.
	var svc struct {
		Status   string   `json:"status"`
		Err      []string `json:"error"`
		Weighted struct {
			Services []struct {
				Name   string `json:"name"`
				Weight *int   `json:"weight"`
			} `json:"services"`
		} `json:"weighted"`
	}
	apiGet(t, r.tr.Admin+"/api/http/services/app@http", &svc)
	if svc.Status != "enabled" || len(svc.Err) > 0 {
		t.Errorf("weighted service: status %q, errors %v", svc.Status, svc.Err)
	}
	zero := false
	for _, c := range svc.Weighted.Services {
		zero = zero || (c.Name == router.ServiceName("app", "a") && c.Weight != nil && *c.Weight == 0)
	}
	if !zero {
		t.Errorf("weighted service children %+v: no app.a with weight 0", svc.Weighted.Services)
	}
	for _, path := range []string{"/api/http/routers/app@http", "/api/http/services/" + router.MetricService("app", "a"), "/api/http/services/" + router.MetricService("app", "b")} {
		var info struct {
			Status string   `json:"status"`
			Err    []string `json:"error"`
		}
		apiGet(t, r.tr.Admin+path, &info)
		if info.Status != "enabled" || len(info.Err) > 0 {
			t.Errorf("%s: status %q, errors %v", path, info.Status, info.Err)
		}
	}
}

func apiGet(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, b)
	}
}

func TestTraefikSwitchesWithoutAFailedRequest(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	blue, green := newBackend(t, "blue"), newBackend(t, "green")
	r.apply(appRoute(map[*backend]int{blue: 100, green: 0}))

	const clients = 4
	var failed, served atomic.Int64
	var firstFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := r.get(appHost)
				served.Add(1)
				if err != nil || code != http.StatusOK {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %q %v", code, body, err))
				}
			}
		}()
	}
	stopClients := func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopClients)

	eventually(t, 60*time.Second, "blue serves 200 requests", func() bool { return blue.hits.Load() >= 200 })
	if green.hits.Load() != 0 {
		t.Fatalf("green received %d requests at weight 0", green.hits.Load())
	}
	r.apply(appRoute(map[*backend]int{blue: 0, green: 100}))
	blueAtSwitch, greenAtSwitch := blue.hits.Load(), green.hits.Load()
	eventually(t, 60*time.Second, "green serves 200 requests after the switch", func() bool {
		return green.hits.Load() >= greenAtSwitch+200
	})
	stopClients()

	t.Logf("%d requests, blue %d, green %d, failed %d", served.Load(), blue.hits.Load(), green.hits.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed during the switch; first: %v", failed.Load(), served.Load(), firstFailure.Load())
	}
	// Once the new routers are live, only requests already in flight (one
	// per client) can still reach blue.
	if late := blue.hits.Load() - blueAtSwitch; late > clients {
		t.Errorf("blue received %d requests after the switch was live, want at most %d in flight", late, clients)
	}
}

func TestTraefikMetricsShowTheFailingBackendOnly(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	a, b := newBackend(t, "a"), newBackend(t, "b")
	r.apply(appRoute(map[*backend]int{a: 50, b: 50}))
	// Some healthy traffic first, so both services have series before the
	// window and the window is a difference, not a first sighting.
	r.send(100, http.StatusOK)

	ctx := context.Background()
	metrics := r.tr.Admin + "/metrics"
	sa, sb := router.MetricService("app", "a"), router.MetricService("app", "b")
	// Traefik counts a request after answering it: wait for the counts.
	var before router.Snapshot
	eventually(t, 30*time.Second, "traefik counts the first 100 requests", func() bool {
		var err error
		before, err = router.Scrape(ctx, http.DefaultClient, metrics)
		if err != nil {
			t.Fatal(err)
		}
		empty := router.Snapshot{}
		return router.Compare(empty, before, sa).Requests+router.Compare(empty, before, sb).Requests == 100
	})
	a.hits.Store(0)
	b.hits.Store(0)

	b.fail.Store(true)
	const n = 200
	r.send(n, 0) // 200s and 500s, counted below
	var after router.Snapshot
	var wa, wb router.Window
	eventually(t, 30*time.Second, "traefik counts the window's requests", func() bool {
		var err error
		after, err = router.Scrape(ctx, http.DefaultClient, metrics)
		if err != nil {
			t.Fatal(err)
		}
		wa, wb = router.Compare(before, after, sa), router.Compare(before, after, sb)
		return wa.Requests+wb.Requests == n
	})
	t.Logf("a: %+v", wa)
	t.Logf("b: %+v", wb)
	if wa.Requests != a.hits.Load() || wb.Requests != b.hits.Load() {
		t.Errorf("requests a %d b %d, backends received a %d b %d", wa.Requests, wb.Requests, a.hits.Load(), b.hits.Load())
	}
	if wb.Requests == 0 || wb.Errors != wb.Requests || wb.ErrorRatio != 1 {
		t.Errorf("failing backend: %d errors of %d, ratio %v; want all", wb.Errors, wb.Requests, wb.ErrorRatio)
	}
	if wa.Requests == 0 || wa.Errors != 0 || wa.ErrorRatio != 0 {
		t.Errorf("healthy backend: %d errors of %d, ratio %v; want none", wa.Errors, wa.Requests, wa.ErrorRatio)
	}
	for name, w := range map[string]router.Window{"a": wa, "b": wb} {
		if w.MeanLatency <= 0 || w.MeanLatency > 10*time.Second {
			t.Errorf("%s: mean latency %v", name, w.MeanLatency)
		}
		if !(w.P95Low < w.P95High) || w.P95High > 5*time.Second {
			t.Errorf("%s: p95 bracket (%v, %v] against mean %v", name, w.P95Low, w.P95High, w.MeanLatency)
		}
		if w.Reset != 0 {
			t.Errorf("%s: %d resets in one Traefik's life", name, w.Reset)
		}
	}
	// The weighted service has no series of its own.
	if svcs := strings.Join(after.Services(), " "); strings.Contains(" "+svcs+" ", " app@http ") || !strings.Contains(svcs, sa) {
		t.Errorf("services in the metrics: %s", svcs)
	}
}
