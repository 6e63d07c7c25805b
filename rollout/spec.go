package rollout

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Strategy is how the new version meets traffic.
type Strategy string

// The strategies.
const (
	// Canary runs the new version beside the stable one and gives it a
	// growing share of the traffic, step by step.
	Canary Strategy = "canary"
	// BlueGreen runs the new version at full size with no traffic (the
	// preview), then switches all traffic to it at once, keeping the old
	// version running for a rollback window.
	BlueGreen Strategy = "blueGreen"
)

// Provider is what splits traffic between the colours.
type Provider string

// The providers.
const (
	// Traefik is Traefik v3, fed weighted services through its HTTP
	// provider.
	Traefik Provider = "traefik"
	// NoRouter realises a canary's weights by replica counts alone (see
	// Replicas); blue/green cannot work without a router.
	NoRouter Provider = "none"
)

// Defaults, applied by Parse to what the file leaves out.
const (
	// DefaultInterval is one analysis interval: long enough that a router
	// scraped every 15s gives at least one fresh sample, short enough that
	// a failing canary is cut off within half a minute.
	DefaultInterval = 30 * time.Second
	// DefaultMinRequests is the fewest requests an interval needs before
	// its error ratio or latency means anything: with 20, one error is 5%,
	// the ratio most users set as their limit; with fewer, one unlucky
	// request would fail or pass a step on its own.
	DefaultMinRequests = 20
	// DefaultScaleDownDelay covers several polls of a router's
	// configuration (Traefik polls every 5s by default) and a request in
	// flight; it is also Argo Rollouts' default scaleDownDelaySeconds.
	DefaultScaleDownDelay = 30 * time.Second
	// DefaultFailureLimit aborts on the first failing interval: traffic
	// goes back to stable within one interval of the errors starting.
	DefaultFailureLimit = 1
)

// Limits that catch typos rather than honour them.
const (
	maxSteps        = 20
	maxFailureLimit = 100
	maxDuration     = 7 * 24 * time.Hour
	minInterval     = time.Second
)

// Spec is one service's rollout as its x-flotilla field declares it. The
// zero value is not valid; Parse returns one with defaults applied and
// checked.
type Spec struct {
	Strategy Strategy
	// Steps are a canary's traffic weights, strictly increasing, each
	// 1..100. Blue/green has none.
	Steps []Step
	// Preview is blue/green's time with no traffic before the switch.
	Preview Preview
	// RollbackWindow is how long, after a blue/green switch, the old
	// version keeps running untouched so traffic can go back to it at
	// once. Default 0: the stable service is updated as soon as the switch
	// is made (and, with an analysis, has passed one interval of live
	// traffic); a rollback after that is a new commit. Canary has none.
	RollbackWindow time.Duration
	// Router splits the traffic; provider none when absent.
	Router Router
	// ScaleDownDelay is how long the extra colour keeps its tasks after
	// traffic has left it (a completed or aborted rollout), so that the
	// router, which polls its configuration, has let go of them before
	// they stop: scaled down at once, the requests the router still sends
	// there in the meantime fail. Default DefaultScaleDownDelay with a
	// router, 0 without one (no router is polling).
	ScaleDownDelay time.Duration
	// Analysis gates every step on evidence; nil means time and operators
	// alone decide.
	Analysis *Analysis
}

// Step is one canary step.
type Step struct {
	// Weight is the canary's share of traffic, in percent.
	Weight int
	// Pause is how long the step is held once its traffic flows; 0 waits
	// for an operator's promote.
	Pause time.Duration
}

// Preview is blue/green's preview phase.
type Preview struct {
	// Pause is how long the preview runs before the switch; 0 waits for an
	// operator's promote.
	Pause time.Duration
}

// Router is the router that carries a rollout's weights.
type Router struct {
	Provider Provider
	// Rule is the router's matching rule, in the provider's own syntax
	// (for Traefik, e.g. Host(`shop.example`)). Required with a router.
	Rule string
	// EntryPoints are the router's entry points; empty means the
	// provider's default (for Traefik, every entry point).
	EntryPoints []string
	// Port is the container port both colours listen on, which the router
	// sends to. Required with a router.
	Port int
}

// Analysis says what evidence a step must show before it is passed, and
// what aborts it. The router's own metrics (MaxErrorRatio, MaxLatency)
// need a router; Prometheus and Webhook do not.
type Analysis struct {
	// Interval is how often a verdict is taken; default 30s.
	Interval time.Duration
	// MaxErrorRatio is the highest share (0..1) of the canary's requests
	// that may fail (5xx); nil leaves it unchecked.
	MaxErrorRatio *float64
	// MaxLatency is the highest mean latency of the canary's requests; 0
	// leaves it unchecked.
	MaxLatency time.Duration
	// MinRequests is the fewest canary requests an interval needs for the
	// router's metrics to give a verdict; fewer is Inconclusive. Default
	// 20.
	MinRequests int
	// FailureLimit is how many consecutive failing verdicts abort;
	// default 1.
	FailureLimit int
	// Traefik is where MaxErrorRatio and MaxLatency are read; required
	// with either of them.
	Traefik *TraefikMetrics
	// Prometheus is a query whose value must stay at most Max.
	Prometheus *PrometheusCheck
	// Webhook is called each interval; it passes the step by answering 2xx.
	Webhook *WebhookCheck
}

// TraefikMetrics is Traefik's Prometheus endpoint. Flotilla scrapes it
// itself at each interval's bounds rather than asking a Prometheus server,
// so the router's checks need nothing else running.
type TraefikMetrics struct {
	// Metrics is the endpoint's URL, e.g. http://traefik:8082/metrics.
	Metrics string
}

// PrometheusCheck is one query against a Prometheus server, evaluated at
// the end of each interval.
type PrometheusCheck struct {
	// Address is the server's base URL, e.g. http://prometheus:9090; it
	// may carry basic-auth credentials, so it is never shown.
	Address string
	// Query is PromQL whose single value (one sample or a scalar) is
	// compared with Max; $interval in it stands for the length of the
	// interval judged, e.g. 30s (a compose file writes $$interval, since
	// its interpolation reads $interval as a variable).
	Query string
	// Max is the highest value that passes.
	Max float64
}

// WebhookCheck is one HTTP endpoint that judges an interval.
type WebhookCheck struct {
	URL string
}

// measuresPreview reports whether the analysis can judge a blue/green
// preview, which gets no router traffic: only a query or a webhook (a
// smoke test against the preview service) can.
func (a *Analysis) measuresPreview() bool {
	return a != nil && (a.Prometheus != nil || a.Webhook != nil)
}

// FieldError is a refusal of one field of a rollout spec. Field is the path
// below the rollout key, such as "steps[1].weight"; empty for the value as
// a whole.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// ErrInvalid matches every refusal of a rollout spec (errors.Is).
var ErrInvalid = errors.New("invalid rollout")

// invalid is one refusal: its text is only what is wrong, since the
// caller (compose) already says where, and it still matches ErrInvalid.
type invalid struct{ msg string }

func (e invalid) Error() string        { return e.msg }
func (e invalid) Is(target error) bool { return target == ErrInvalid }

func refuse(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: invalid{fmt.Sprintf(format, args...)}}
}

// setDefaults fills what the file may leave out.
func (s *Spec) setDefaults() {
	if s.Router.Provider == "" {
		s.Router.Provider = NoRouter
	}
	if a := s.Analysis; a != nil {
		if a.Interval == 0 {
			a.Interval = DefaultInterval
		}
		if a.MinRequests == 0 {
			a.MinRequests = DefaultMinRequests
		}
		if a.FailureLimit == 0 {
			a.FailureLimit = DefaultFailureLimit
		}
	}
}

// Validate checks a spec with its defaults applied. A refusal is a
// *FieldError.
func (s Spec) Validate() error {
	switch s.Strategy {
	case Canary:
		if len(s.Steps) == 0 {
			return refuse("steps", "a canary needs at least one step")
		}
		if len(s.Steps) > maxSteps {
			return refuse("steps", "at most %d steps, not %d", maxSteps, len(s.Steps))
		}
		prev := 0
		for i, st := range s.Steps {
			f := fmt.Sprintf("steps[%d]", i)
			if st.Weight < 1 || st.Weight > 100 {
				return refuse(f+".weight", "weight must be a whole number from 1 to 100, not %d", st.Weight)
			}
			if st.Weight <= prev {
				return refuse(f+".weight", "weights must increase: %d follows %d", st.Weight, prev)
			}
			prev = st.Weight
			if err := checkDuration(f+".pause", st.Pause); err != nil {
				return err
			}
		}
		if s.Preview != (Preview{}) {
			return refuse("preview", "preview applies to blueGreen only")
		}
		if s.RollbackWindow != 0 {
			return refuse("rollbackWindow", "rollbackWindow applies to blueGreen only")
		}
	case BlueGreen:
		if len(s.Steps) > 0 {
			return refuse("steps", "steps apply to canary only; blueGreen has a preview")
		}
		if err := checkDuration("preview.pause", s.Preview.Pause); err != nil {
			return err
		}
		if err := checkDuration("rollbackWindow", s.RollbackWindow); err != nil {
			return err
		}
		if s.Router.Provider == NoRouter {
			return refuse("router.provider", "blueGreen needs a router: without one, traffic cannot be sent to one colour only")
		}
	default:
		return refuse("strategy", "strategy must be canary or blueGreen, not %q", s.Strategy)
	}
	if err := s.Router.validate(); err != nil {
		return err
	}
	if err := checkDuration("scaleDownDelay", s.ScaleDownDelay); err != nil {
		return err
	}
	if s.Analysis != nil {
		return s.Analysis.validate(s.Router.Provider)
	}
	return nil
}

func (r Router) validate() error {
	switch r.Provider {
	case NoRouter:
		if r.Rule != "" || len(r.EntryPoints) > 0 || r.Port != 0 {
			return refuse("router", "provider none takes no rule, entryPoints or port")
		}
		return nil
	case Traefik:
	default:
		return refuse("router.provider", "provider must be traefik or none, not %q", r.Provider)
	}
	if r.Rule == "" {
		return refuse("router.rule", "a router needs a rule, e.g. Host(`shop.example`)")
	}
	if r.Port < 1 || r.Port > 65535 {
		return refuse("router.port", "port must be the container port the colours listen on, 1 to 65535, not %d", r.Port)
	}
	for i, e := range r.EntryPoints {
		if e == "" {
			return refuse(fmt.Sprintf("router.entryPoints[%d]", i), "an entry point needs a name")
		}
	}
	return nil
}

func (a *Analysis) validate(p Provider) error {
	if a.Interval < minInterval || a.Interval > maxDuration {
		return refuse("analysis.interval", "interval must be from %s to %s, not %s", minInterval, maxDuration, a.Interval)
	}
	if a.MinRequests < 1 {
		return refuse("analysis.minRequests", "minRequests must be at least 1, not %d", a.MinRequests)
	}
	if a.FailureLimit < 1 || a.FailureLimit > maxFailureLimit {
		return refuse("analysis.failureLimit", "failureLimit must be from 1 to %d, not %d", maxFailureLimit, a.FailureLimit)
	}
	if r := a.MaxErrorRatio; r != nil && (*r < 0 || *r > 1 || *r != *r) {
		return refuse("analysis.maxErrorRatio", "maxErrorRatio must be from 0 to 1, not %v", *r)
	}
	if err := checkDuration("analysis.maxLatency", a.MaxLatency); err != nil {
		return err
	}
	routerChecks := a.MaxErrorRatio != nil || a.MaxLatency > 0
	if routerChecks && p == NoRouter {
		f := "analysis.maxErrorRatio"
		if a.MaxErrorRatio == nil {
			f = "analysis.maxLatency"
		}
		return refuse(f, "the router's metrics measure this, and router provider is none; use prometheus or webhook")
	}
	if tm := a.Traefik; tm != nil {
		if !routerChecks {
			return refuse("analysis.traefik", "Traefik's metrics are read only for maxErrorRatio or maxLatency; set one or drop traefik")
		}
		if err := checkURL("analysis.traefik.metrics", tm.Metrics); err != nil {
			return err
		}
	} else if routerChecks {
		return refuse("analysis.traefik.metrics", "maxErrorRatio and maxLatency are read from Traefik's Prometheus endpoint; give its URL, e.g. http://traefik:8082/metrics")
	}
	if pc := a.Prometheus; pc != nil {
		if err := checkURL("analysis.prometheus.address", pc.Address); err != nil {
			return err
		}
		if pc.Query == "" {
			return refuse("analysis.prometheus.query", "a prometheus check needs a query")
		}
		if strings.Contains(pc.Query, "[]") {
			// Compose interpolation turns an unset $interval into nothing.
			return refuse("analysis.prometheus.query", "the query has an empty range []: in a compose file write $$interval, since compose reads $interval as a variable")
		}
		if pc.Max != pc.Max {
			return refuse("analysis.prometheus.max", "max must be a number")
		}
	}
	if w := a.Webhook; w != nil {
		if err := checkURL("analysis.webhook.url", w.URL); err != nil {
			return err
		}
	}
	if !routerChecks && a.Prometheus == nil && a.Webhook == nil {
		return refuse("analysis", "an analysis must check something: maxErrorRatio, maxLatency, prometheus or webhook")
	}
	return nil
}

func checkDuration(field string, d time.Duration) error {
	if d < 0 || d > maxDuration {
		return refuse(field, "must be a duration from 0 to %s, not %s", maxDuration, d)
	}
	return nil
}

func checkURL(field, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The value is not echoed: a URL may carry a token.
		return refuse(field, "want an http or https URL with a host")
	}
	return nil
}
