package rollout

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Parse reads the value of a service's rollout key as a YAML decoder gives
// it (maps, lists, strings, numbers), applies the defaults and checks it.
// Unknown keys are refused. A refusal is a *FieldError whose Field is the
// path below the rollout key.
func Parse(raw any) (Spec, error) {
	m, err := mapping("", raw, "strategy, steps, preview, rollbackWindow, scaleDownDelay, router, analysis")
	if err != nil {
		return Spec{}, err
	}
	var s Spec
	_, hasDelay := m["scaleDownDelay"]
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "strategy":
			str, ok := v.(string)
			if !ok || (Strategy(str) != Canary && Strategy(str) != BlueGreen) {
				return Spec{}, refuse(k, "strategy must be canary or blueGreen, not %v", v)
			}
			s.Strategy = Strategy(str)
		case "steps":
			list, ok := v.([]any)
			if !ok {
				return Spec{}, refuse(k, "want a list of steps like {weight: 10, pause: 2m}, not %T", v)
			}
			for i, item := range list {
				st, err := parseStep(fmt.Sprintf("steps[%d]", i), item)
				if err != nil {
					return Spec{}, err
				}
				s.Steps = append(s.Steps, st)
			}
		case "preview":
			pm, err := mapping(k, v, "pause")
			if err != nil {
				return Spec{}, err
			}
			for _, pk := range slices.Sorted(maps.Keys(pm)) {
				pv := pm[pk]
				if pk != "pause" {
					return Spec{}, unknown(k+"."+pk, pk, "pause")
				}
				if s.Preview.Pause, err = duration(k+".pause", pv); err != nil {
					return Spec{}, err
				}
			}
		case "rollbackWindow":
			if s.RollbackWindow, err = duration(k, v); err != nil {
				return Spec{}, err
			}
		case "scaleDownDelay":
			if s.ScaleDownDelay, err = duration(k, v); err != nil {
				return Spec{}, err
			}
		case "router":
			if s.Router, err = parseRouter(v); err != nil {
				return Spec{}, err
			}
		case "analysis":
			a, err := parseAnalysis(v)
			if err != nil {
				return Spec{}, err
			}
			s.Analysis = &a
		default:
			return Spec{}, unknown(k, k, "strategy, steps, preview, rollbackWindow, scaleDownDelay, router, analysis")
		}
	}
	if s.Strategy == "" {
		return Spec{}, refuse("strategy", "a rollout needs a strategy: canary or blueGreen")
	}
	s.setDefaults()
	if !hasDelay && s.Router.Provider != NoRouter {
		s.ScaleDownDelay = DefaultScaleDownDelay
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

func parseStep(f string, raw any) (Step, error) {
	m, err := mapping(f, raw, "weight, pause")
	if err != nil {
		return Step{}, err
	}
	var st Step
	seen := false
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "weight":
			n, ok := asInt(v)
			if !ok || n < 1 || n > 100 {
				return Step{}, refuse(f+".weight", "weight must be a whole number from 1 to 100, not %v", v)
			}
			st.Weight, seen = n, true
		case "pause":
			if st.Pause, err = duration(f+".pause", v); err != nil {
				return Step{}, err
			}
		default:
			return Step{}, unknown(f+"."+k, k, "weight, pause")
		}
	}
	if !seen {
		return Step{}, refuse(f+".weight", "a step needs a weight")
	}
	return st, nil
}

func parseRouter(raw any) (Router, error) {
	const known = "provider, rule, entryPoints, port"
	m, err := mapping("router", raw, known)
	if err != nil {
		return Router{}, err
	}
	var r Router
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, f := m[k], "router."+k
		switch k {
		case "provider":
			s, _ := v.(string)
			switch Provider(s) {
			case Traefik, NoRouter:
				r.Provider = Provider(s)
			default:
				return Router{}, refuse(f, "provider must be traefik or none, not %v", v)
			}
		case "rule":
			if r.Rule, err = str(f, v); err != nil {
				return Router{}, err
			}
		case "entryPoints":
			list, ok := v.([]any)
			if !ok {
				return Router{}, refuse(f, "want a list of entry point names, not %T", v)
			}
			for i, e := range list {
				s, err := str(fmt.Sprintf("%s[%d]", f, i), e)
				if err != nil {
					return Router{}, err
				}
				r.EntryPoints = append(r.EntryPoints, s)
			}
		case "port":
			n, ok := asInt(v)
			if !ok || n < 1 || n > 65535 {
				return Router{}, refuse(f, "port must be a whole number from 1 to 65535, not %v", v)
			}
			r.Port = n
		default:
			return Router{}, unknown(f, k, known)
		}
	}
	if r.Provider == "" && len(m) > 0 {
		return Router{}, refuse("router.provider", "a router needs a provider: traefik or none")
	}
	return r, nil
}

func parseAnalysis(raw any) (Analysis, error) {
	const known = "interval, maxErrorRatio, maxLatency, minRequests, failureLimit, traefik, prometheus, webhook"
	m, err := mapping("analysis", raw, known)
	if err != nil {
		return Analysis{}, err
	}
	var a Analysis
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, f := m[k], "analysis."+k
		switch k {
		case "interval":
			if a.Interval, err = duration(f, v); err != nil {
				return Analysis{}, err
			}
			if a.Interval == 0 {
				return Analysis{}, refuse(f, "interval must be more than 0")
			}
		case "maxErrorRatio":
			x, ok := asFloat(v)
			if !ok {
				return Analysis{}, refuse(f, "maxErrorRatio must be a number from 0 to 1, not %v", v)
			}
			a.MaxErrorRatio = &x
		case "maxLatency":
			if a.MaxLatency, err = duration(f, v); err != nil {
				return Analysis{}, err
			}
		case "minRequests", "failureLimit":
			n, ok := asInt(v)
			if !ok || n < 1 {
				return Analysis{}, refuse(f, "%s must be a whole number of at least 1, not %v", k, v)
			}
			if k == "minRequests" {
				a.MinRequests = n
			} else {
				a.FailureLimit = n
			}
		case "traefik":
			tm, err := mapping(f, v, "metrics")
			if err != nil {
				return Analysis{}, err
			}
			var t TraefikMetrics
			for _, tk := range slices.Sorted(maps.Keys(tm)) {
				if tk != "metrics" {
					return Analysis{}, unknown(f+"."+tk, tk, "metrics")
				}
				if t.Metrics, err = str(f+".metrics", tm[tk]); err != nil {
					return Analysis{}, err
				}
			}
			a.Traefik = &t
		case "prometheus":
			pc, err := parsePrometheus(v)
			if err != nil {
				return Analysis{}, err
			}
			a.Prometheus = &pc
		case "webhook":
			wm, err := mapping(f, v, "url")
			if err != nil {
				return Analysis{}, err
			}
			var w WebhookCheck
			for _, wk := range slices.Sorted(maps.Keys(wm)) {
				wv := wm[wk]
				if wk != "url" {
					return Analysis{}, unknown(f+"."+wk, wk, "url")
				}
				if w.URL, err = str(f+".url", wv); err != nil {
					return Analysis{}, err
				}
			}
			a.Webhook = &w
		default:
			return Analysis{}, unknown(f, k, known)
		}
	}
	return a, nil
}

func parsePrometheus(raw any) (PrometheusCheck, error) {
	const f, known = "analysis.prometheus", "address, query, max"
	m, err := mapping(f, raw, known)
	if err != nil {
		return PrometheusCheck{}, err
	}
	var pc PrometheusCheck
	hasMax := false
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "address":
			pc.Address, err = str(f+"."+k, v)
		case "query":
			pc.Query, err = str(f+"."+k, v)
		case "max":
			x, ok := asFloat(v)
			if !ok {
				return PrometheusCheck{}, refuse(f+".max", "max must be a number, not %v", v)
			}
			pc.Max, hasMax = x, true
		default:
			return PrometheusCheck{}, unknown(f+"."+k, k, known)
		}
		if err != nil {
			return PrometheusCheck{}, err
		}
	}
	if !hasMax {
		return PrometheusCheck{}, refuse(f+".max", "a prometheus check needs max, the highest value the query may return")
	}
	return pc, nil
}

// mapping returns raw as a mapping with string keys; a null is an empty one.
func mapping(field string, raw any, known string) (map[string]any, error) {
	switch m := raw.(type) {
	case map[string]any:
		return m, nil
	case nil:
		return map[string]any{}, nil
	}
	return nil, refuse(field, "want a mapping with %s, not %T", known, raw)
}

func unknown(field, key, known string) error {
	return refuse(field, "unknown key %q (known: %s)", key, known)
}

func str(field string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", refuse(field, "want a string, not %T", v)
	}
	return s, nil
}

// duration reads a Go duration string ("2m", "500ms"); a bare 0 is
// accepted as none, any other number is refused since its unit would be a
// guess.
func duration(field string, v any) (time.Duration, error) {
	if n, ok := asInt(v); ok && n == 0 {
		return 0, nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, refuse(field, "want a duration such as 30s or 2m, not %v", v)
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, refuse(field, "want a duration such as 30s or 2m, not %q", s)
	}
	if d < 0 || d > maxDuration {
		return 0, refuse(field, "must be a duration from 0 to %s, not %s", maxDuration, d)
	}
	return d, nil
}

func asInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		if n > math.MaxInt32 || n < math.MinInt32 {
			return 0, false
		}
		return int(n), true
	case uint64:
		if n > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int, int64, uint64:
		i, ok := asInt(n)
		return float64(i), ok
	}
	return 0, false
}

// Value is the spec in one canonical spelling, as a YAML encoder takes it:
// every default written out, durations in Go's own form, keys that do not
// apply left out. Parse(s.Value()) gives s back, so two spellings of one
// spec give one manifest.
func (s Spec) Value() map[string]any {
	v := map[string]any{"strategy": string(s.Strategy)}
	switch s.Strategy {
	case Canary:
		steps := make([]any, len(s.Steps))
		for i, st := range s.Steps {
			m := map[string]any{"weight": st.Weight}
			if st.Pause > 0 {
				m["pause"] = st.Pause.String()
			}
			steps[i] = m
		}
		v["steps"] = steps
	case BlueGreen:
		pv := map[string]any{}
		if s.Preview.Pause > 0 {
			pv["pause"] = s.Preview.Pause.String()
		}
		v["preview"] = pv
		v["rollbackWindow"] = s.RollbackWindow.String()
	}
	r := map[string]any{"provider": string(s.Router.Provider)}
	if s.Router.Provider != NoRouter {
		r["rule"] = s.Router.Rule
		r["port"] = s.Router.Port
		if len(s.Router.EntryPoints) > 0 {
			eps := make([]any, len(s.Router.EntryPoints))
			for i, e := range s.Router.EntryPoints {
				eps[i] = e
			}
			r["entryPoints"] = eps
		}
	}
	v["router"] = r
	v["scaleDownDelay"] = s.ScaleDownDelay.String()
	if a := s.Analysis; a != nil {
		av := map[string]any{
			"interval":     a.Interval.String(),
			"minRequests":  a.MinRequests,
			"failureLimit": a.FailureLimit,
		}
		if a.MaxErrorRatio != nil {
			av["maxErrorRatio"] = *a.MaxErrorRatio
		}
		if a.MaxLatency > 0 {
			av["maxLatency"] = a.MaxLatency.String()
		}
		if tm := a.Traefik; tm != nil {
			av["traefik"] = map[string]any{"metrics": tm.Metrics}
		}
		if pc := a.Prometheus; pc != nil {
			av["prometheus"] = map[string]any{"address": pc.Address, "query": pc.Query, "max": pc.Max}
		}
		if w := a.Webhook; w != nil {
			av["webhook"] = map[string]any{"url": w.URL}
		}
		v["analysis"] = av
	}
	return v
}
