package analysis

import (
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/router"
)

func limits(ratio float64, latency time.Duration) rollout.Analysis {
	return rollout.Analysis{MaxErrorRatio: &ratio, MaxLatency: latency, MinRequests: 20}
}

func TestJudge(t *testing.T) {
	ok := router.Window{Requests: 100, Errors: 1, ErrorRatio: 0.01, MeanLatency: 20 * time.Millisecond}
	for _, tc := range []struct {
		name           string
		a              rollout.Analysis
		canary, stable router.Window
		want           Judgement
	}{
		{"within limits", limits(0.05, 100*time.Millisecond), ok, ok, Judgement{Result: rollout.Pass}},
		{"error ratio over", limits(0.05, 0), router.Window{Requests: 100, Errors: 31, ErrorRatio: 0.31}, ok,
			Judgement{rollout.Fail, "error ratio", "0.31 > 0.05 (stable 0.01)"}},
		{"error ratio over, stable idle", limits(0.05, 0), router.Window{Requests: 100, Errors: 31, ErrorRatio: 0.31}, router.Window{},
			Judgement{rollout.Fail, "error ratio", "0.31 > 0.05"}},
		{"a finer limit shows finer figures", limits(0.005, 0), router.Window{Requests: 1000, Errors: 7, ErrorRatio: 0.007}, router.Window{},
			Judgement{rollout.Fail, "error ratio", "0.007 > 0.005"}},
		{"error ratio at the limit passes", limits(0.05, 0), router.Window{Requests: 100, Errors: 5, ErrorRatio: 0.05}, ok,
			Judgement{Result: rollout.Pass}},
		{"latency over", limits(0.05, 100*time.Millisecond), router.Window{Requests: 50, MeanLatency: 730 * time.Millisecond}, ok,
			Judgement{rollout.Fail, "mean latency", "730ms > 100ms (stable 20ms)"}},
		{"latency unchecked", rollout.Analysis{MinRequests: 20, MaxLatency: 0}, router.Window{Requests: 50, MeanLatency: time.Hour}, ok,
			Judgement{Result: rollout.Pass}},
		{"ratio unchecked", rollout.Analysis{MinRequests: 20, MaxLatency: time.Second}, router.Window{Requests: 50, Errors: 50, ErrorRatio: 1}, ok,
			Judgement{Result: rollout.Pass}},
		{"too few requests", limits(0.05, 0), router.Window{Requests: 3, Errors: 3, ErrorRatio: 1}, ok,
			Judgement{rollout.Inconclusive, "requests", "3 < 20"}},
		{"no requests", limits(0.05, 0), router.Window{}, ok, Judgement{rollout.Inconclusive, "requests", "0 < 20"}},
		{"traefik restarted", limits(0.05, 0), router.Window{Requests: 100, Errors: 100, ErrorRatio: 1, Restarted: true}, ok,
			Judgement{rollout.Inconclusive, "traefik", "Traefik restarted within the interval"}},
		{"counter went back", limits(0.05, 0), router.Window{Requests: 100, Reset: 2}, ok,
			Judgement{rollout.Inconclusive, "traefik", "2 counters went back within the interval"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Judge(tc.a, tc.canary, tc.stable); got != tc.want {
				t.Errorf("Judge = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCombine(t *testing.T) {
	pass := Judgement{Result: rollout.Pass}
	fail := Judgement{rollout.Fail, "error ratio", "1.00 > 0.05"}
	unsure := Judgement{rollout.Inconclusive, "webhook", "answered 503"}
	for _, tc := range []struct {
		name string
		js   []Judgement
		want Judgement
	}{
		{"none", nil, Judgement{}},
		{"all pass", []Judgement{pass, pass}, pass},
		{"a failure wins over anything", []Judgement{unsure, pass, fail}, fail},
		{"unproven is not a pass", []Judgement{pass, unsure}, unsure},
	} {
		if got := combine(tc.js); got != tc.want {
			t.Errorf("%s: combine = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
