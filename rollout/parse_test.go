package rollout

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func decode(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

const canaryYAML = `
strategy: canary
steps:
  - {weight: 10, pause: 2m}
  - {weight: 50, pause: 5m}
  - {weight: 100}
router: {provider: traefik, rule: "Host(` + "`shop.example`" + `)", entryPoints: [web], port: 8080}
analysis:
  maxErrorRatio: 0.05
  maxLatency: 500ms
  traefik: {metrics: "http://traefik:8082/metrics"}
  prometheus: {address: "http://prom:9090", query: "sum(rate(x[1m]))", max: 3}
  webhook: {url: "https://check.example/hook"}
`

func TestParse_canaryWithDefaults(t *testing.T) {
	s, err := Parse(decode(t, canaryYAML))
	if err != nil {
		t.Fatal(err)
	}
	ratio := 0.05
	want := Spec{
		Strategy: Canary,
		Steps:    []Step{{10, 2 * time.Minute}, {50, 5 * time.Minute}, {100, 0}},
		Router:   Router{Provider: Traefik, Rule: "Host(`shop.example`)", EntryPoints: []string{"web"}, Port: 8080},
		// A router polls its weights: the colour traffic leaves
		// keeps its tasks a while.
		ScaleDownDelay: DefaultScaleDownDelay,
		Analysis: &Analysis{Interval: DefaultInterval, MaxErrorRatio: &ratio, MaxLatency: 500 * time.Millisecond,
			MinRequests: DefaultMinRequests, FailureLimit: DefaultFailureLimit,
			Traefik:    &TraefikMetrics{Metrics: "http://traefik:8082/metrics"},
			Prometheus: &PrometheusCheck{Address: "http://prom:9090", Query: "sum(rate(x[1m]))", Max: 3},
			Webhook:    &WebhookCheck{URL: "https://check.example/hook"}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", s, want)
	}
}

func TestParse_blueGreenAndNoRouterDefault(t *testing.T) {
	s, err := Parse(decode(t, `{strategy: blueGreen, preview: {pause: 5m}, rollbackWindow: 10m, router: {provider: traefik, rule: "Host(`+"`a`"+`)", port: 80}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Preview.Pause != 5*time.Minute || s.RollbackWindow != 10*time.Minute || s.Analysis != nil {
		t.Errorf("Parse = %+v", s)
	}
	s, err = Parse(decode(t, `{strategy: canary, steps: [{weight: 20, pause: 0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Router.Provider != NoRouter || s.Steps[0].Pause != 0 || s.ScaleDownDelay != 0 {
		t.Errorf("Parse = %+v, want provider none, a step waiting for promote and no scale-down delay", s)
	}
	s, err = Parse(decode(t, `{strategy: blueGreen, scaleDownDelay: 5s, router: {provider: traefik, rule: r, port: 80}}`))
	if err != nil || s.ScaleDownDelay != 5*time.Second {
		t.Errorf("Parse = %+v, %v; want a scale-down delay of 5s", s, err)
	}
	if _, err := Parse(decode(t, `{strategy: blueGreen, scaleDownDelay: -1s, router: {provider: traefik, rule: r, port: 80}}`)); err == nil || !strings.Contains(err.Error(), "scaleDownDelay") {
		t.Errorf("a negative scale-down delay: %v", err)
	}
}

func TestSpec_ValueRoundTripsAndIsOneSpelling(t *testing.T) {
	spellings := []string{
		canaryYAML,
		`
strategy: canary
analysis:
  webhook: {url: "https://check.example/hook"}
  interval: 30s
  minRequests: 20
  failureLimit: 1
  maxErrorRatio: 0.050
  maxLatency: 0.5s
  traefik:
    metrics: "http://traefik:8082/metrics"
  prometheus: {max: 3.0, query: "sum(rate(x[1m]))", address: "http://prom:9090"}
steps:
  - {pause: 120s, weight: 10}
  - {weight: 50, pause: 300s}
  - {weight: 100, pause: 0}
router: {port: 8080, provider: traefik, entryPoints: [web], rule: "Host(` + "`shop.example`" + `)"}
`,
	}
	var first map[string]any
	for i, text := range spellings {
		s, err := Parse(decode(t, text))
		if err != nil {
			t.Fatalf("spelling %d: %v", i, err)
		}
		v := s.Value()
		// Through YAML, as a manifest stores it.
		out, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(decode(t, string(out)))
		if err != nil {
			t.Fatalf("spelling %d: canonical form does not parse: %v\n%s", i, err, out)
		}
		if !reflect.DeepEqual(back, s) {
			t.Errorf("spelling %d: round trip gave %+v, want %+v", i, back, s)
		}
		if i == 0 {
			first = v
		} else if !reflect.DeepEqual(v, first) {
			t.Errorf("spelling %d: canonical form %v differs from %v", i, v, first)
		}
	}
}

func TestParse_refusesNamingTheField(t *testing.T) {
	cases := []struct{ name, text, field string }{
		{"not a mapping", `3`, ""},
		{"no strategy", `{steps: [{weight: 10}]}`, "strategy"},
		{"unknown strategy", `{strategy: linear}`, "strategy"},
		{"unknown key", `{strategy: canary, steps: [{weight: 10}], stepz: 1}`, "stepz"},
		{"steps not a list", `{strategy: canary, steps: 10}`, "steps"},
		{"no steps", `{strategy: canary}`, "steps"},
		{"weight zero", `{strategy: canary, steps: [{weight: 0}]}`, "steps[0].weight"},
		{"weight too big", `{strategy: canary, steps: [{weight: 10}, {weight: 101}]}`, "steps[1].weight"},
		{"weight fraction", `{strategy: canary, steps: [{weight: 10.5}]}`, "steps[0].weight"},
		{"weights not increasing", `{strategy: canary, steps: [{weight: 50}, {weight: 50}]}`, "steps[1].weight"},
		{"step without weight", `{strategy: canary, steps: [{pause: 1m}]}`, "steps[0].weight"},
		{"step unknown key", `{strategy: canary, steps: [{weight: 5, wait: 1m}]}`, "steps[0].wait"},
		{"pause bare number", `{strategy: canary, steps: [{weight: 5, pause: 30}]}`, "steps[0].pause"},
		{"pause bad", `{strategy: canary, steps: [{weight: 5, pause: soon}]}`, "steps[0].pause"},
		{"pause negative", `{strategy: canary, steps: [{weight: 5, pause: -1m}]}`, "steps[0].pause"},
		{"preview on canary", `{strategy: canary, steps: [{weight: 5}], preview: {pause: 1m}}`, "preview"},
		{"window on canary", `{strategy: canary, steps: [{weight: 5}], rollbackWindow: 1m}`, "rollbackWindow"},
		{"steps on blueGreen", `{strategy: blueGreen, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 80}}`, "steps"},
		{"blueGreen without router", `{strategy: blueGreen}`, "router.provider"},
		{"preview unknown key", `{strategy: blueGreen, preview: {wait: 1m}, router: {provider: traefik, rule: r, port: 80}}`, "preview.wait"},
		{"unknown provider", `{strategy: canary, steps: [{weight: 5}], router: {provider: nginx}}`, "router.provider"},
		{"router without provider", `{strategy: canary, steps: [{weight: 5}], router: {rule: r, port: 80}}`, "router.provider"},
		{"router without rule", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, port: 80}}`, "router.rule"},
		{"router without port", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r}}`, "router.port"},
		{"router port too big", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 70000}}`, "router.port"},
		{"router none with rule", `{strategy: canary, steps: [{weight: 5}], router: {provider: none, rule: r}}`, "router"},
		{"entry point not a string", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 80, entryPoints: [{}]}}`, "router.entryPoints[0]"},
		{"empty analysis", `{strategy: canary, steps: [{weight: 5}], analysis: {}}`, "analysis"},
		{"router metric without router", `{strategy: canary, steps: [{weight: 5}], analysis: {maxErrorRatio: 0.1}}`, "analysis.maxErrorRatio"},
		{"latency without router", `{strategy: canary, steps: [{weight: 5}], analysis: {maxLatency: 1s}}`, "analysis.maxLatency"},
		{"router metric without traefik endpoint", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 80}, analysis: {maxLatency: 1s}}`, "analysis.traefik.metrics"},
		{"traefik endpoint not a URL", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 80}, analysis: {maxLatency: 1s, traefik: {metrics: "traefik:8082"}}}`, "analysis.traefik.metrics"},
		{"traefik endpoint not a string", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 80}, analysis: {maxLatency: 1s, traefik: {metrics: 8082}}}`, "analysis.traefik.metrics"},
		{"traefik unknown key", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 80}, analysis: {maxLatency: 1s, traefik: {metrics: "http://t/m", url: "http://t"}}}`, "analysis.traefik.url"},
		{"traefik with nothing to read", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 80}, analysis: {traefik: {metrics: "http://t/m"}, webhook: {url: "http://h"}}}`, "analysis.traefik"},
		{"ratio above 1", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 80}, analysis: {maxErrorRatio: 5}}`, "analysis.maxErrorRatio"},
		{"ratio a string", `{strategy: canary, steps: [{weight: 5}], router: {provider: traefik, rule: r, port: 80}, analysis: {maxErrorRatio: low}}`, "analysis.maxErrorRatio"},
		{"interval zero", `{strategy: canary, steps: [{weight: 5}], analysis: {interval: 0s, webhook: {url: "http://h"}}}`, "analysis.interval"},
		{"interval too short", `{strategy: canary, steps: [{weight: 5}], analysis: {interval: 1ms, webhook: {url: "http://h"}}}`, "analysis.interval"},
		{"minRequests zero", `{strategy: canary, steps: [{weight: 5}], analysis: {minRequests: 0, webhook: {url: "http://h"}}}`, "analysis.minRequests"},
		{"failureLimit huge", `{strategy: canary, steps: [{weight: 5}], analysis: {failureLimit: 1000, webhook: {url: "http://h"}}}`, "analysis.failureLimit"},
		{"webhook not a URL", `{strategy: canary, steps: [{weight: 5}], analysis: {webhook: {url: "check"}}}`, "analysis.webhook.url"},
		{"webhook unknown key", `{strategy: canary, steps: [{weight: 5}], analysis: {webhook: {url: "http://h", token: x}}}`, "analysis.webhook.token"},
		{"prometheus without max", `{strategy: canary, steps: [{weight: 5}], analysis: {prometheus: {address: "http://p", query: q}}}`, "analysis.prometheus.max"},
		{"prometheus without query", `{strategy: canary, steps: [{weight: 5}], analysis: {prometheus: {address: "http://p", max: 1}}}`, "analysis.prometheus.query"},
		{"prometheus with an empty range", `{strategy: canary, steps: [{weight: 5}], analysis: {prometheus: {address: "http://p", query: "rate(x[])", max: 1}}}`, "analysis.prometheus.query"},
		{"prometheus bad address", `{strategy: canary, steps: [{weight: 5}], analysis: {prometheus: {address: "ftp://p", query: q, max: 1}}}`, "analysis.prometheus.address"},
		{"analysis unknown key", `{strategy: canary, steps: [{weight: 5}], analysis: {webhook: {url: "http://h"}, retries: 3}}`, "analysis.retries"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(decode(t, tc.text))
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse = %v, want a FieldError wrapping ErrInvalid", err)
			}
			if fe.Field != tc.field {
				t.Errorf("field = %q, want %q (%v)", fe.Field, tc.field, err)
			}
		})
	}
}

func TestParse_doesNotEchoAWebhookURL(t *testing.T) {
	_, err := Parse(decode(t, `{strategy: canary, steps: [{weight: 5}], analysis: {webhook: {url: "hook.example/s3cret-token"}}}`))
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Parse = %v, want a refusal without the URL", err)
	}
}

func TestReplicas(t *testing.T) {
	for _, tc := range []struct{ stable, weight, want int }{
		{10, 10, 1}, {10, 50, 5}, {10, 100, 10}, {3, 10, 1}, {3, 50, 2}, {1, 1, 1}, {7, 33, 3}, {0, 50, 0}, {5, 0, 0},
	} {
		if got := Replicas(tc.stable, tc.weight); got != tc.want {
			t.Errorf("Replicas(%d, %d) = %d, want %d", tc.stable, tc.weight, got, tc.want)
		}
	}
}

func TestColourName(t *testing.T) {
	if ColourName("web", Canary) != "web-canary" || ColourName("web", BlueGreen) != "web-preview" {
		t.Errorf("colour names %s, %s", ColourName("web", Canary), ColourName("web", BlueGreen))
	}
}

func FuzzParse(f *testing.F) {
	f.Add(canaryYAML)
	f.Add(`{strategy: blueGreen, preview: {pause: 5m}, rollbackWindow: 10m, router: {provider: traefik, rule: r, port: 80}, analysis: {webhook: {url: "http://h"}}}`)
	f.Add(`{strategy: canary, steps: [{weight: 1}, {weight: 100, pause: 0}], analysis: {prometheus: {address: "http://p", query: q, max: -1e300}}}`)
	f.Add(`{strategy: canary, steps: [{weight: .nan}], analysis: {maxErrorRatio: .inf}}`)
	f.Fuzz(func(t *testing.T, text string) {
		var v any
		if yaml.Unmarshal([]byte(text), &v) != nil {
			return
		}
		s, err := Parse(v)
		if err != nil {
			return
		}
		out, err := yaml.Marshal(s.Value())
		if err != nil {
			t.Fatal(err)
		}
		var back any
		if err := yaml.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(back)
		if err != nil {
			t.Fatalf("canonical form of %q does not parse: %v\n%s", text, err, out)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip of %q: %+v, want %+v", text, again, s)
		}
	})
}
