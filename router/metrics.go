package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The two families Traefik v3.7 emits per load-balancer service, labelled
// code, method, protocol and service ("<name>@<provider>"), as observed on
// the real binary (testdata/traefik-v3.7.13-*.txt). A weighted service
// has no series of its own: its traffic is counted on its children.
const (
	metricRequests = "traefik_service_requests_total"
	metricDuration = "traefik_service_request_duration_seconds"
	// From Traefik's process collector: tells a restart apart from a
	// counter that went back.
	metricStarted = "process_start_time_seconds"
)

// maxMetricsBytes bounds one scrape: Traefik's endpoint grows with the number
// of services and status codes, never near this.
const maxMetricsBytes = 64 << 20

// Snapshot is one scrape of Traefik's Prometheus endpoint, kept per series
// (not summed per service), so that Compare can tell a counter that went
// back (Traefik restarted) from one that moved on.
type Snapshot struct {
	requests  map[string]requestSeries
	durations map[string]durationSeries
	started   float64 // process start, Unix seconds; 0 when not exposed
}

type requestSeries struct {
	service, code string
	value         float64
}

type durationSeries struct {
	service    string
	count, sum float64
	buckets    map[float64]float64 // upper bound -> cumulative count
}

// Scrape reads Traefik's metrics endpoint (e.g. http://traefik:8082/metrics)
// in the Prometheus text format, with client (http.DefaultClient when nil).
func Scrape(ctx context.Context, client *http.Client, to string) (Snapshot, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, to, nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("router: scrape: %w", HideURL(err))
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return Snapshot{}, fmt.Errorf("router: scrape: %w", HideURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Snapshot{}, fmt.Errorf("router: scrape: answered %s", resp.Status)
	}
	s, err := ParseMetrics(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return Snapshot{}, fmt.Errorf("router: scrape: %w", err)
	}
	return s, nil
}

// ParseMetrics reads a Prometheus text exposition and keeps Traefik's
// per-service request counters and duration histograms; the rest is ignored.
func ParseMetrics(r io.Reader) (Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse metrics: %w", err)
	}
	s := Snapshot{requests: map[string]requestSeries{}, durations: map[string]durationSeries{}}
	if mf := families[metricStarted]; mf != nil && len(mf.GetMetric()) == 1 && mf.GetMetric()[0].GetGauge() != nil {
		s.started = mf.GetMetric()[0].GetGauge().GetValue()
	}
	if mf := families[metricRequests]; mf != nil {
		for _, m := range mf.GetMetric() {
			if m.GetCounter() == nil {
				return Snapshot{}, fmt.Errorf("parse metrics: %s is not a counter", metricRequests)
			}
			s.requests[signature(m)] = requestSeries{
				service: label(m, "service"),
				code:    label(m, "code"),
				value:   m.GetCounter().GetValue(),
			}
		}
	}
	if mf := families[metricDuration]; mf != nil {
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				return Snapshot{}, fmt.Errorf("parse metrics: %s is not a histogram", metricDuration)
			}
			d := durationSeries{
				service: label(m, "service"),
				count:   float64(h.GetSampleCount()),
				sum:     h.GetSampleSum(),
				buckets: map[float64]float64{},
			}
			for _, b := range h.GetBucket() {
				d.buckets[b.GetUpperBound()] = float64(b.GetCumulativeCount())
			}
			s.durations[signature(m)] = d
		}
	}
	return s, nil
}

// Services lists the service labels the snapshot holds, sorted.
func (s Snapshot) Services() []string {
	seen := map[string]bool{}
	for _, r := range s.requests {
		seen[r.service] = true
	}
	for _, d := range s.durations {
		seen[d.service] = true
	}
	out := make([]string, 0, len(seen))
	for svc := range seen {
		out = append(out, svc)
	}
	sort.Strings(out)
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// signature identifies a series by all its labels (Traefik may add header
// labels to the request counter), sorted by name.
func signature(m *dto.Metric) string {
	pairs := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		pairs = append(pairs, l.GetName()+"\x00"+l.GetValue())
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "\x01")
}

// Window is what one service did between two snapshots.
type Window struct {
	// Requests answered, and among them Errors with a 5xx status (Traefik
	// counts its own 502/504 when the backend is unreachable or slow).
	Requests, Errors int64
	// ErrorRatio is Errors/Requests, 0 without requests: check Requests
	// before reading anything into it.
	ErrorRatio float64
	// MeanLatency is the mean request duration Traefik measured (histogram
	// sum over count), 0 without requests.
	MeanLatency time.Duration
	// P95Low < 95th percentile <= P95High: the histogram only tells which
	// bucket the percentile falls in, so it is given as that bucket's bounds
	// rather than an interpolated figure. P95High is the largest Duration when
	// the percentile lies beyond the largest finite bucket. Both are 0 without
	// requests.
	P95Low, P95High time.Duration
	// Restarted says Traefik's process start time differs between the
	// snapshots: the window holds what the new process counted since it
	// started, which may be less than what happened.
	Restarted bool
	// Reset counts the series whose counter went back or vanished within one
	// Traefik process (it drops a service's series when the service leaves
	// its configuration). Such a series is counted from zero, never
	// negatively, so the window may undercount; a non-zero Reset says so.
	Reset int
}

// Compare says what service (a metric label, see MetricService) did between
// before and after, two snapshots of the same Traefik in that order.
func Compare(before, after Snapshot, service string) Window {
	var w Window
	if before.started != 0 && after.started != 0 && before.started != after.started {
		w.Restarted = true
		before = Snapshot{}
	}
	var requests, errors float64
	for sig, a := range after.requests {
		if a.service != service {
			continue
		}
		d, reset := increase(before.requests[sig].value, a.value, hasRequest(before, sig))
		if reset {
			w.Reset++
		}
		requests += d
		if strings.HasPrefix(a.code, "5") {
			errors += d
		}
	}
	for sig, b := range before.requests {
		if _, ok := after.requests[sig]; !ok && b.service == service {
			w.Reset++
		}
	}
	w.Requests, w.Errors = int64(math.Round(requests)), int64(math.Round(errors))
	if w.Requests > 0 {
		w.ErrorRatio = float64(w.Errors) / float64(w.Requests)
	}

	var count, sum float64
	buckets := map[float64]float64{}
	for sig, a := range after.durations {
		if a.service != service {
			continue
		}
		b, seen := before.durations[sig]
		if seen && wentBack(b, a) {
			w.Reset++
			seen = false
		}
		count += a.count
		sum += a.sum
		for le, c := range a.buckets {
			buckets[le] += c
		}
		if seen {
			count -= b.count
			sum -= b.sum
			for le, c := range b.buckets {
				buckets[le] -= c
			}
		}
	}
	for sig, b := range before.durations {
		if _, ok := after.durations[sig]; !ok && b.service == service {
			w.Reset++
		}
	}
	if count > 0 {
		w.MeanLatency = seconds(sum / count)
		w.P95Low, w.P95High = quantileBucket(buckets, count, 0.95)
	}
	return w
}

func hasRequest(s Snapshot, sig string) bool { _, ok := s.requests[sig]; return ok }

// increase is a counter's growth from was to now; a counter below its
// earlier value restarted from zero, so all of now is growth. A series that
// was not there before started at zero (Traefik creates series on first use).
func increase(was, now float64, existed bool) (float64, bool) {
	if !existed {
		return now, false
	}
	if now < was {
		return now, true
	}
	return now - was, false
}

// wentBack says whether a histogram series restarted: any of its counts
// below the earlier one.
func wentBack(before, after durationSeries) bool {
	if after.count < before.count || after.sum < before.sum {
		return true
	}
	for le, c := range before.buckets {
		if after.buckets[le] < c {
			return true
		}
	}
	return false
}

// quantileBucket finds the bucket of the cumulative histogram holding the
// q-quantile of count observations and returns its bounds.
func quantileBucket(buckets map[float64]float64, count, q float64) (low, high time.Duration) {
	bounds := make([]float64, 0, len(buckets))
	for le := range buckets {
		if !math.IsInf(le, +1) {
			bounds = append(bounds, le)
		}
	}
	sort.Float64s(bounds)
	rank := q * count
	prev := 0.0
	for _, le := range bounds {
		if buckets[le] >= rank {
			return seconds(prev), seconds(le)
		}
		prev = le
	}
	return seconds(prev), time.Duration(math.MaxInt64)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// HideURL keeps the URL of a failed HTTP call, which may carry a token, out
// of an error that a status shows: the caller knows which endpoint it
// called. The analysis uses it for every call it makes.
func HideURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
