package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/router"
)

// RouteName is the router route of app's service, and StableBackend and
// ColourBackend its backends: the names the served Traefik configuration
// gives them, so the metrics of the same names are the colours' traffic.
func RouteName(app, service string) string { return app + "-" + service }

// StableBackend is the backend of the stable service.
const StableBackend = "stable"

// ColourBackend is the backend of the extra colour of a strategy.
func ColourBackend(s rollout.Strategy) string {
	if s == rollout.BlueGreen {
		return "preview"
	}
	return "canary"
}

// CallTimeout bounds one scrape, webhook call or query (less when the
// interval is shorter): a check that cannot answer in time proves nothing,
// and the pass waits for it.
const CallTimeout = 10 * time.Second

// Target is one rollout as the pass sees it before deciding.
type Target struct {
	App, Service string
	Spec         rollout.Spec
	// State is the rollout's recorded state, read before the decision.
	State rollout.State
}

// Runner keeps each rollout's current interval and produces its verdicts.
// Its zero value is ready; it is safe for concurrent use.
type Runner struct {
	// Client makes the calls; nil uses one without a timeout of its own
	// (CallTimeout applies anyway).
	Client *http.Client
	Logger *slog.Logger

	mu   sync.Mutex
	runs map[string]*interval
}

// interval is one rollout's current interval.
type interval struct {
	step                  string    // the step it measures (stepKey)
	start                 time.Time // when it began
	before                router.Snapshot
	beforeErr             error
	traefikURL, webhookTo string
}

// Verdict is t's verdict at now: the zero Verdict while its current
// interval runs (or when there is nothing to judge), else the judgement of
// the interval that just ended, From its start To now. The next interval
// begins at once. An unreadable source makes the verdict Inconclusive,
// never Fail or Pass.
func (r *Runner) Verdict(ctx context.Context, t Target, now time.Time) (rollout.Verdict, Judgement) {
	key := t.App + "/" + t.Service
	a := t.Spec.Analysis
	step, measured := stepKey(t.State)
	r.mu.Lock()
	cur := r.runs[key]
	if a == nil || !measured {
		delete(r.runs, key)
		r.mu.Unlock()
		return rollout.Verdict{}, Judgement{}
	}
	traefikURL, webhookTo := r.sources(t)
	if traefikURL == "" && webhookTo == "" && a.Prometheus == nil {
		delete(r.runs, key)
		r.mu.Unlock()
		return rollout.Verdict{}, Judgement{}
	}
	if cur == nil || cur.step != step || cur.traefikURL != traefikURL || cur.webhookTo != webhookTo {
		// A new step (or new sources) that Begin did not see start: its
		// first interval starts now.
		r.begin(ctx, key, step, traefikURL, webhookTo, a.Interval, now)
		return rollout.Verdict{}, Judgement{}
	}
	if now.Before(cur.start.Add(a.Interval)) {
		r.mu.Unlock()
		return rollout.Verdict{}, Judgement{}
	}
	ended := *cur
	// The next interval starts now; its snapshot is filled in below.
	next := &interval{step: step, start: now, traefikURL: traefikURL, webhookTo: webhookTo}
	r.runs[key] = next
	r.mu.Unlock()

	var js []Judgement
	if traefikURL != "" {
		after, err := r.scrape(ctx, traefikURL, a.Interval)
		r.mu.Lock()
		next.before, next.beforeErr = after, err
		r.mu.Unlock()
		switch {
		case ended.beforeErr != nil:
			js = append(js, Judgement{rollout.Inconclusive, "traefik metrics", "at the interval's start: " + ended.beforeErr.Error()})
		case err != nil:
			js = append(js, Judgement{rollout.Inconclusive, "traefik metrics", err.Error()})
		default:
			route := RouteName(t.App, t.Service)
			canary := router.Compare(ended.before, after, router.MetricService(route, ColourBackend(t.Spec.Strategy)))
			stable := router.Compare(ended.before, after, router.MetricService(route, StableBackend))
			js = append(js, Judge(*a, canary, stable))
		}
	}
	if webhookTo != "" {
		js = append(js, r.callWebhook(ctx, webhookTo, t, ended.start, now))
	}
	if a.Prometheus != nil {
		js = append(js, r.queryPrometheus(ctx, *a.Prometheus, a.Interval, ended.start, now))
	}
	j := combine(js)
	v := rollout.Verdict{Result: j.Result, Metric: j.Metric, Values: j.Values, From: ended.start, To: now}
	r.logger().Info("rollout analysis", "app", t.App, "service", t.Service, "step", step,
		"result", string(j.Result), "metric", j.Metric, "values", j.Values, "from", ended.start, "to", now)
	return v, j
}

// Begin starts the first interval of the step t.State has just started
// (a decision that made a step's traffic flow), so that the step's first
// verdict comes one interval after its traffic, not one interval after the
// next pass: a failing canary is then cut off within one interval of its
// errors starting. A state that measures nothing is ignored.
func (r *Runner) Begin(ctx context.Context, t Target, now time.Time) {
	step, measured := stepKey(t.State)
	a := t.Spec.Analysis
	if a == nil || !measured {
		return
	}
	traefikURL, webhookTo := r.sources(t)
	if traefikURL == "" && webhookTo == "" && a.Prometheus == nil {
		return
	}
	r.mu.Lock()
	r.begin(ctx, t.App+"/"+t.Service, step, traefikURL, webhookTo, a.Interval, now)
}

// begin starts key's interval at now, with the router's counters at its
// start when it reads them. Called with r.mu held; returns with it
// released (the scrape is made without it).
func (r *Runner) begin(ctx context.Context, key, step, traefikURL, webhookTo string, every time.Duration, now time.Time) {
	cur := &interval{step: step, start: now, traefikURL: traefikURL, webhookTo: webhookTo}
	if r.runs == nil {
		r.runs = map[string]*interval{}
	}
	r.runs[key] = cur
	r.mu.Unlock()
	if traefikURL != "" {
		before, err := r.scrape(ctx, traefikURL, every)
		r.mu.Lock()
		cur.before, cur.beforeErr = before, err
		r.mu.Unlock()
	}
}

// Forget drops what is kept of app's rollouts (the application is gone).
func (r *Runner) Forget(app string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.runs {
		if len(k) > len(app) && k[:len(app)+1] == app+"/" {
			delete(r.runs, k)
		}
	}
}

// sources are the endpoints t's analysis reads in its current phase. A
// blue/green preview gets no router traffic, so Traefik's metrics are not
// read for it.
func (r *Runner) sources(t Target) (traefikURL, webhookTo string) {
	a := t.Spec.Analysis
	if tm := a.Traefik; tm != nil && t.State.Phase != rollout.Previewing {
		traefikURL = tm.Metrics
	}
	if w := a.Webhook; w != nil {
		webhookTo = w.URL
	}
	return traefikURL, webhookTo
}

// stepKey names the step st measures; measured is false when no step's
// traffic flows (not started, promoting, ended).
func stepKey(st rollout.State) (string, bool) {
	switch st.Phase {
	case rollout.Progressing, rollout.Previewing, rollout.Switched:
	default:
		return "", false
	}
	if st.StepStarted.IsZero() {
		return "", false
	}
	return fmt.Sprintf("%s/%s/%d/%s", st.Revision, st.Phase, st.Step, st.StepStarted.UTC().Format(time.RFC3339Nano)), true
}

func (r *Runner) scrape(ctx context.Context, to string, every time.Duration) (router.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, min(CallTimeout, every))
	defer cancel()
	return router.Scrape(ctx, r.httpClient(), to)
}

// httpClient is r.Client, or a default, following redirects only within
// the same scheme and host: the applications file grants each URL an
// analysis calls (allow.analysisURLs), and a redirect must not carry the
// call past that grant.
func (r *Runner) httpClient() *http.Client {
	c := http.Client{}
	if r.Client != nil {
		c = *r.Client
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
			return errors.New("redirected to another host; not followed")
		}
		return nil
	}
	return &c
}

// WebhookRequest is the body POSTed to an analysis webhook at the end of
// each interval.
type WebhookRequest struct {
	App     string `json:"app"`
	Service string `json:"service"`
	// Phase and Step say what is judged: a canary's step (from 0), a
	// blue/green preview or its rollback window.
	Phase   string         `json:"phase"`
	Step    int            `json:"step"`
	Weights WebhookWeights `json:"weights"`
	// From and To bound the interval judged.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// WebhookWeights are the traffic shares, in percent, during the interval.
type WebhookWeights struct {
	Stable int `json:"stable"`
	Canary int `json:"canary"`
}

// WebhookAnswer is what a webhook answers, with a 2xx status: result
// "pass" or "fail" (anything else is Inconclusive), and optionally what it
// measured, for the abort reason.
type WebhookAnswer struct {
	Result string `json:"result"`
	Metric string `json:"metric,omitempty"`
	Values string `json:"values,omitempty"`
}

// maxAnswerBytes bounds a webhook's answer: a verdict is a few words.
const maxAnswerBytes = 64 << 10

func (r *Runner) callWebhook(ctx context.Context, to string, t Target, from, now time.Time) Judgement {
	inconclusive := func(why string) Judgement { return Judgement{rollout.Inconclusive, "webhook", why} }
	body, err := json.Marshal(WebhookRequest{App: t.App, Service: t.Service, Phase: string(t.State.Phase), Step: t.State.Step,
		Weights: WebhookWeights{Stable: 100 - t.State.Weight, Canary: t.State.Weight}, From: from.UTC(), To: now.UTC()})
	if err != nil {
		return inconclusive("encode the request: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, min(CallTimeout, t.Spec.Analysis.Interval))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(body))
	if err != nil {
		return inconclusive("build the request: " + router.HideURL(err).Error())
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.httpClient().Do(req)
	if err != nil {
		return inconclusive("call: " + router.HideURL(err).Error())
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return inconclusive("read the answer: " + router.HideURL(err).Error())
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return inconclusive(fmt.Sprintf("answered %s", resp.Status))
	}
	if len(raw) > maxAnswerBytes {
		return inconclusive(fmt.Sprintf("answer longer than %d bytes", maxAnswerBytes))
	}
	var ans WebhookAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return inconclusive("answer is not the JSON expected: " + err.Error())
	}
	metric := ans.Metric
	if metric == "" {
		metric = "webhook"
	}
	switch ans.Result {
	case "pass":
		return Judgement{Result: rollout.Pass}
	case "fail":
		return Judgement{rollout.Fail, metric, ans.Values}
	}
	return inconclusive(fmt.Sprintf("result %q is neither pass nor fail", ans.Result))
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}
