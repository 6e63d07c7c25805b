package router

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// The samples in testdata were captured from the real Traefik v3.7.13 built
// by scripts/traefik.sh (flags: internal/traefiktest.Flags), routing a 50/50
// route "app" over backends a and b, by scraping /metrics:
//
//	1-healthy:   100 requests, all 200 (50 each), and one probe request;
//	2-b-failing: 200 more with b answering 500 (100 each);
//	3-restarted: a second Traefik process on the same configuration,
//	             30 requests with b still failing (15 each).

func sample(t *testing.T, name string) Snapshot {
	t.Helper()
	f, err := os.Open("testdata/traefik-v3.7.13-" + name + ".txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseMetrics(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// sampleWithout is a sample with the lines of one service left out, as
// Traefik leaves them out once the service is gone from its configuration.
func sampleWithout(t *testing.T, name, service string) Snapshot {
	t.Helper()
	b, err := os.ReadFile("testdata/traefik-v3.7.13-" + name + ".txt")
	if err != nil {
		t.Fatal(err)
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `service="`+service+`"`) {
			kept.WriteString(sc.Text() + "\n")
		}
	}
	s, err := ParseMetrics(&kept)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseMetrics_recordedServices(t *testing.T) {
	s := sample(t, "2-b-failing")
	got := strings.Join(s.Services(), " ")
	// No series for the weighted service "app@http": only its children count.
	if got != "app.a@http app.b@http probe.probe@http" {
		t.Fatalf("services = %s", got)
	}
	if s.started != 1.79652880679e+09 {
		t.Errorf("process start = %v", s.started)
	}
}

func TestCompare_recordedWindow(t *testing.T) {
	before, after := sample(t, "1-healthy"), sample(t, "2-b-failing")
	a := Compare(before, after, "app.a@http")
	b := Compare(before, after, "app.b@http")
	if a.Requests != 100 || a.Errors != 0 || a.ErrorRatio != 0 || a.Reset != 0 || a.Restarted {
		t.Errorf("a = %+v, want 100 requests, no error", a)
	}
	if b.Requests != 100 || b.Errors != 100 || b.ErrorRatio != 1 || b.Reset != 0 || b.Restarted {
		t.Errorf("b = %+v, want 100 requests, all errors", b)
	}
	// From the samples' sums and counts: a went from 0.05869214200000002 s
	// over 50 requests to 0.164766643 s over 150.
	wantMean := seconds((0.164766643 - 0.05869214200000002) / 100)
	if d := a.MeanLatency - wantMean; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("a mean latency = %v, want %v", a.MeanLatency, wantMean)
	}
	// a's buckets (cumulative, le 0.001/0.0025/0.005/0.01) went from
	// 26/47/49/50 to 91/144/148/150: the window's are 65/97/99/100, so the
	// 95th of 100 falls in (0.001, 0.0025].
	if a.P95Low != time.Millisecond || a.P95High != 2500*time.Microsecond {
		t.Errorf("a p95 in (%v, %v], want (1ms, 2.5ms]", a.P95Low, a.P95High)
	}
	// b's window is its 500s only (its 200 series did not move).
	wantB := seconds(0.10937791399999999 / 100)
	if d := b.MeanLatency - wantB; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("b mean latency = %v, want %v", b.MeanLatency, wantB)
	}
	if none := Compare(before, after, "app@http"); none != (Window{}) {
		t.Errorf("the weighted service: %+v, want nothing", none)
	}
}

func TestCompare_sameSnapshotIsAnEmptyWindow(t *testing.T) {
	s := sample(t, "2-b-failing")
	if w := Compare(s, s, "app.b@http"); w != (Window{}) {
		t.Fatalf("window = %+v, want zero", w)
	}
}

func TestCompare_restartCountsTheNewProcessOnly(t *testing.T) {
	w := Compare(sample(t, "2-b-failing"), sample(t, "3-restarted"), "app.b@http")
	if !w.Restarted || w.Requests != 15 || w.Errors != 15 || w.ErrorRatio != 1 {
		t.Fatalf("window = %+v, want the restarted process's 15 requests, all errors", w)
	}
	if w.MeanLatency <= 0 {
		t.Errorf("mean latency = %v", w.MeanLatency)
	}
}

// Within one process a counter can only go back when Traefik dropped the
// series and made it again: that series counts from zero, never negatively.
func TestCompare_counterWentBack(t *testing.T) {
	w := Compare(sample(t, "2-b-failing"), sample(t, "1-healthy"), "app.a@http")
	if w.Restarted || w.Reset != 2 {
		t.Fatalf("window = %+v, want the request and duration series reset", w)
	}
	if w.Requests != 50 || w.Errors != 0 || w.MeanLatency <= 0 || w.P95Low < 0 {
		t.Errorf("window = %+v, want a's 50 requests of the later sample", w)
	}
	b := Compare(sample(t, "2-b-failing"), sample(t, "1-healthy"), "app.b@http")
	// b's 200 series did not move; its 500 series vanished.
	if b.Requests != 0 || b.Errors != 0 || b.Reset != 2 || b.ErrorRatio != 0 {
		t.Errorf("b = %+v, want nothing counted and the vanished series reported", b)
	}
}

func TestCompare_vanishedService(t *testing.T) {
	w := Compare(sample(t, "2-b-failing"), sampleWithout(t, "2-b-failing", "app.a@http"), "app.a@http")
	if w.Requests != 0 || w.Reset != 2 {
		t.Fatalf("window = %+v, want no requests and two vanished series", w)
	}
}

func TestQuantileBucket(t *testing.T) {
	cum := map[float64]float64{0.01: 10, 0.1: 94, 0.5: 95, 1: 100, math.Inf(+1): 100}
	if lo, hi := quantileBucket(cum, 100, 0.95); lo != 100*time.Millisecond || hi != 500*time.Millisecond {
		t.Errorf("p95 in (%v, %v], want (100ms, 500ms]", lo, hi)
	}
	if lo, hi := quantileBucket(cum, 100, 0.05); lo != 0 || hi != 10*time.Millisecond {
		t.Errorf("p5 in (%v, %v], want (0, 10ms]", lo, hi)
	}
	beyond := map[float64]float64{0.1: 50, 5: 90, math.Inf(+1): 100}
	if lo, hi := quantileBucket(beyond, 100, 0.95); lo != 5*time.Second || hi != time.Duration(math.MaxInt64) {
		t.Errorf("p95 beyond the last bucket in (%v, %v], want (5s, max]", lo, hi)
	}
}

func TestParseMetrics_refuses(t *testing.T) {
	for name, text := range map[string]string{
		"not the text format": "traefik_service_requests_total{service=\"a@http\" 1\n",
		"wrong type":          "# TYPE traefik_service_requests_total gauge\ntraefik_service_requests_total{service=\"a@http\"} 1\n",
	} {
		if _, err := ParseMetrics(strings.NewReader(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
