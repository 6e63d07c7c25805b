// Command console measures the operator console's application list in
// Chromium: it serves the console over the API's in-memory controller with
// thousands of applications, publishes events at a steady rate, each
// changing one application, and reads back from the page
//
//   - the first paint of the list: the first animation frame after the
//     first row is in the table, from navigation start;
//   - the full list: the first frame after every row is in the table;
//   - an event's arrival (its bytes reaching the page's event stream) to
//     its row rewritten in the DOM, and to the next frame after that,
//     median and 95th percentile;
//   - long tasks (over 50 ms) on the page's main thread while events flow,
//     and the main thread's CPU time per event (script, style, layout), which
//     a busy machine inflates far less than wall-clock figures.
//
// It measures the browser, not the controller: the API answers from memory.
// The page is instrumented from outside (a script the DevTools protocol adds
// before the page's own), so the console carries no benchmark code.
//
//	go run ./bench/console [-apps 5000] [-rate 50] [-duration 20s] [-loads 3] [-view 'sort=health']
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/web"
)

type options struct {
	apps     int
	rate     int
	duration time.Duration
	loads    int
	view     string
	chromium string
}

func main() {
	var o options
	flag.IntVar(&o.apps, "apps", 5000, "applications in the list")
	flag.IntVar(&o.rate, "rate", 50, "events per second, each changing one application")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "how long events flow")
	flag.IntVar(&o.loads, "loads", 3, "page loads timed; the figures are their medians")
	flag.StringVar(&o.view, "view", "", `the list's hash query, e.g. "sort=health" (default: sorted by name, no filter)`)
	flag.StringVar(&o.chromium, "chromium", "", "Chromium binary (default: chromium on the PATH)")
	flag.Parse()
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

// fleet makes n applications spread over sync and health states, three
// swarms, four projects and a few sets.
func fleet(n int) []application.Status {
	syncs := []application.Sync{application.Synced, application.Synced, application.Synced, application.OutOfSync, application.SyncUnknown}
	healths := []application.Health{application.Healthy, application.Healthy, application.Healthy, application.Progressing, application.Degraded, application.Missing}
	swarms := []string{"local", "eu", "us"}
	out := make([]application.Status, n)
	for i := range out {
		name := fmt.Sprintf("team%d-app%05d", i%4, i)
		h := healths[i%len(healths)]
		st := application.Status{
			Name: name, Stack: name, Destination: swarms[i%len(swarms)], Sync: syncs[i%len(syncs)], Health: h,
			Revision: fmt.Sprintf("%040x", i), SeenRevision: fmt.Sprintf("%040x", i), LastAppliedRevision: i%9 + 1,
			Services: []application.ServiceStatus{
				{Name: "web", Health: h, Running: 2, Desired: 2},
				{Name: "worker", Health: application.Healthy, Running: 1, Desired: 1},
			},
		}
		if i%10 == 0 {
			st.Set = fmt.Sprintf("set%d", i%30/10)
		}
		if h != application.Healthy {
			st.HealthMessage = "web: 1 of 2 tasks running"
		}
		out[i] = st
	}
	return out
}

func projects() []application.Project {
	var ps []application.Project
	for i := range 4 {
		ps = append(ps, application.Project{Name: fmt.Sprintf("team%d", i), Applications: []string{fmt.Sprintf("team%d-*", i)}})
	}
	return ps
}

// server is the API with the console over the in-memory controller.
type server struct {
	url    string
	ctl    *apitest.Controller
	broker *events.Broker
	apps   []application.Status

	mu   sync.Mutex
	next map[string]application.Status
}

func serve(ctx context.Context, n int) (*server, error) {
	s := &server{apps: fleet(n), broker: events.NewBroker(events.BrokerOptions{}), next: map[string]application.Status{}}
	s.ctl = apitest.NewController(s.apps...)
	s.ctl.Result = func(app string, _ api.SyncOptions) api.SyncResult {
		s.mu.Lock()
		defer s.mu.Unlock()
		return api.SyncResult{Action: "upgrade", Status: s.next[app]}
	}
	h := api.New(api.Options{
		Controller: s.ctl, NoAuth: true, UI: web.Handler(), Events: s.broker,
		Policy: access.NewPolicy(projects()), Logger: slog.New(slog.DiscardHandler),
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() { srv.Close() })
	s.url = "http://" + ln.Addr().String()
	return s, nil
}

// change flips one application's health and publishes what a pass would.
func (s *server) change(i, tick int) error {
	st := s.apps[i]
	if st.Health == application.Degraded {
		st.Health, st.HealthMessage = application.Healthy, ""
	} else {
		st.Health, st.HealthMessage = application.Degraded, fmt.Sprintf("web: 0 of 2 tasks running (tick %d)", tick)
	}
	st.Services = slices.Clone(st.Services)
	st.Services[0].Health = st.Health
	s.apps[i] = st
	s.mu.Lock()
	s.next[st.Name] = st
	s.mu.Unlock()
	done, err := s.ctl.RequestSync(st.Name, api.SyncOptions{By: "bench"})
	if err != nil {
		return err
	}
	<-done
	s.broker.Publish(events.Event{Type: events.HealthChanged, App: st.Name, Stack: st.Stack})
	return nil
}

// probe runs before the page's scripts. It tees the event stream to note
// when each event's bytes arrive, and watches the table for rows being
// rewritten; a requestAnimationFrame after each change dates the frame that
// shows it.
const probe = `(() => {
  const B = window.__bench = { events: [], rows: [], firstRow: 0, fullList: 0, want: %d, longTasks: [] };
  const now = () => performance.now();
  const frame = (f) => requestAnimationFrame(() => f(now()));
  try {
    new PerformanceObserver((l) => { for (const e of l.getEntries()) B.longTasks.push([e.startTime, e.duration]); })
      .observe({ type: 'longtask', buffered: true });
  } catch (e) {}
  const fetch0 = window.fetch;
  window.fetch = async function (input, init) {
    const res = await fetch0.apply(this, arguments);
    const url = typeof input === 'string' ? input : input.url;
    if (/\/events$/.test(url) && res.ok && res.body) read(res.clone().body);
    return res;
  };
  async function read(body) {
    const r = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await r.read();
      if (done) return;
      const t = now();
      buf += value;
      const lines = buf.split('\n');
      buf = lines.pop();
      for (const l of lines) {
        if (!l.startsWith('data:')) continue;
        try { const ev = JSON.parse(l.slice(5)); if (ev.app) B.events.push([ev.app, t]); } catch (e) {}
      }
    }
  }
  document.addEventListener('DOMContentLoaded', () => {
    const table = document.getElementById('apps');
    if (!table) return;
    new MutationObserver((ms) => {
      const t = now();
      const names = new Set();
      for (const m of ms) if (m.target.tagName === 'TR' && m.target.dataset.name && m.target.isConnected) names.add(m.target.dataset.name);
      if (names.size) frame((ft) => { for (const n of names) B.rows.push([n, t, ft]); });
      let rows = 0;
      for (const g of table.tBodies) rows += g.childElementCount;
      if (!B.firstRow && rows) { B.firstRow = -1; frame((ft) => { B.firstRow = ft; }); }
      // The list is full when the table holds every row the count says
      // is shown (all of them without a filter).
      const shown = parseInt(document.getElementById('count').textContent, 10);
      if (!B.fullList && rows >= (shown >= 0 ? shown : B.want)) { B.fullList = -1; frame((ft) => { B.fullList = ft; }); }
    }).observe(table, { childList: true, subtree: true });
  });
})()`

type results struct {
	Events    [][2]any    `json:"events"`
	Rows      [][3]any    `json:"rows"`
	FirstRow  float64     `json:"firstRow"`
	FullList  float64     `json:"fullList"`
	LongTasks [][]float64 `json:"longTasks"`
}

func run(o options) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := serve(ctx, o.apps)
	if err != nil {
		return err
	}
	path := o.chromium
	if path == "" {
		if path, err = exec.LookPath("chromium"); err != nil {
			return fmt.Errorf("find chromium: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "flotilla-bench-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(path), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900))
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	version, err := chromedp.Run(bctx, chromedp.Evaluate[string](`navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0] || navigator.userAgent`))
	if err != nil {
		return fmt.Errorf("start chromium: %w", err)
	}
	if _, err := chromedp.Call(bctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fmt.Sprintf(probe, o.apps)}); err != nil {
		return err
	}
	url := s.url + "/ui/"
	if o.view != "" {
		url += "#/?" + o.view
	}

	var firstPaints, fullLists []float64
	for range o.loads {
		if err := chromedp.Do(bctx, chromedp.Navigate("about:blank"), chromedp.Navigate(url)); err != nil {
			return err
		}
		if err := poll(bctx, `window.__bench.fullList > 0`, 60*time.Second); err != nil {
			return fmt.Errorf("the full list: %w", err)
		}
		r, err := collect(bctx)
		if err != nil {
			return err
		}
		firstPaints, fullLists = append(firstPaints, r.FirstRow), append(fullLists, r.FullList)
	}
	if err := poll(bctx, `document.getElementById('live').textContent === 'live'`, 10*time.Second); err != nil {
		return fmt.Errorf("the event stream: %w", err)
	}
	// Events start from a clean record of the last load.
	if err := chromedp.Do(bctx, chromedp.Evaluate[chromedp.Void](`__bench.events = []; __bench.rows = []; __bench.longTasks = []; __bench.t0 = performance.now()`)); err != nil {
		return err
	}
	if _, err := chromedp.Call(bctx, performance.Enable, performance.EnableParams{TimeDomain: performance.EnableTimeDomainThreadTicks}); err != nil {
		return err
	}
	before, err := metrics(bctx)
	if err != nil {
		return err
	}
	tick := time.NewTicker(time.Second / time.Duration(o.rate))
	end := time.After(o.duration)
	sent := 0
	rng := rand.New(rand.NewPCG(1, 2))
loop:
	for {
		select {
		case <-tick.C:
			if err := s.change(rng.IntN(len(s.apps)), sent); err != nil {
				return err
			}
			sent++
		case <-end:
			break loop
		}
	}
	tick.Stop()
	time.Sleep(2 * time.Second) // the last events' reads and frames
	after, err := metrics(bctx)
	if err != nil {
		return err
	}
	r, err := collect(bctx)
	if err != nil {
		return err
	}
	toDOM, toFrame, unmatched := match(r)
	fmt.Printf("console list in %s: %d applications, %d events over %s (%d/s asked), %d page loads\n",
		version, o.apps, sent, o.duration, o.rate, o.loads)
	if o.view != "" {
		fmt.Printf("view: #/?%s\n", o.view)
	}
	fmt.Printf("first paint of the list      %6.0f ms  (median of %v)\n", median(firstPaints), rounded(firstPaints))
	fmt.Printf("full list, every row shown   %6.0f ms  (median of %v)\n", median(fullLists), rounded(fullLists))
	fmt.Printf("event arrival -> row in DOM  median %4.0f ms  p95 %4.0f ms\n", quantile(toDOM, .5), quantile(toDOM, .95))
	fmt.Printf("event arrival -> next frame  median %4.0f ms  p95 %4.0f ms  (%d events matched, %d coalesced or unmatched)\n",
		quantile(toFrame, .5), quantile(toFrame, .95), len(toFrame), unmatched)
	var total float64
	worst := 0.0
	for _, lt := range r.LongTasks {
		total += lt[1]
		worst = max(worst, lt[1])
	}
	per := func(k string) float64 { return (after[k] - before[k]) * 1000 / float64(max(sent, 1)) }
	fmt.Printf("main-thread CPU per event    %.1f ms: script %.1f, style %.1f, layout %.1f\n",
		per("TaskDuration"), per("ScriptDuration"), per("RecalcStyleDuration"), per("LayoutDuration"))
	fmt.Printf("long tasks while events flow %d, %.0f ms in all, longest %.0f ms\n", len(r.LongTasks), total, worst)
	return nil
}

// match pairs each event with the first rewrite of its row after it; a
// later event for the same application in the page's coalescing window
// shares that rewrite, and only the first of them is counted.
func match(r results) (toDOM, toFrame []float64, unmatched int) {
	type rw struct{ dom, frame float64 }
	byApp := map[string][]rw{}
	for _, x := range r.Rows {
		name, _ := x[0].(string)
		dom, _ := x[1].(float64)
		fr, _ := x[2].(float64)
		byApp[name] = append(byApp[name], rw{dom, fr})
	}
	used := map[string]int{}
	for _, e := range r.Events {
		name, _ := e[0].(string)
		t, _ := e[1].(float64)
		rws := byApp[name]
		i := used[name]
		for i < len(rws) && rws[i].dom < t {
			i++
		}
		if i == len(rws) {
			unmatched++
			continue
		}
		used[name] = i + 1
		toDOM = append(toDOM, rws[i].dom-t)
		toFrame = append(toFrame, rws[i].frame-t)
	}
	return toDOM, toFrame, unmatched
}

// metrics reads the page's cumulative durations, in seconds of the main
// thread's CPU time (the thread-ticks time domain).
func metrics(ctx context.Context) (map[string]float64, error) {
	res, err := chromedp.Call(ctx, performance.GetMetrics, cdp.Empty{})
	if err != nil {
		return nil, fmt.Errorf("read performance metrics: %w", err)
	}
	m := map[string]float64{}
	for _, x := range res.Metrics {
		m[x.Name] = x.Value
	}
	return m, nil
}

func collect(ctx context.Context) (results, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[results](`({events: __bench.events, rows: __bench.rows, firstRow: __bench.firstRow, fullList: __bench.fullList, longTasks: __bench.longTasks.filter(l => l[0] >= (__bench.t0 || 0))})`))
}

func poll(ctx context.Context, cond string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!(`+cond+`)`))
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("%s did not hold within %s", cond, d), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func median(xs []float64) float64 { return quantile(xs, .5) }

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + .5)
	}
	return out
}
