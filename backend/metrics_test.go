package backend

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/moby/moby/client"
	apiversions "github.com/moby/moby/client/pkg/versions"

	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// The metric is fed from the transport, so every request the backend sends
// is in it under the same operation name Stats uses: the version ping the
// client negotiates with first, and each read after it.
func TestDockerRequestsMetric_countsEveryRequestTheDaemonIsSentIncludingThePing(t *testing.T) {
	ctx := context.Background()
	swarmtest.Need(t)
	m := metrics.New()
	// No client given: built from the environment, as the controller's is,
	// so it negotiates its API version with a ping of its own.
	b, err := New(ctx, Options{
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnRequest: m.DockerRequests(metrics.LocalSwarm),
	})
	if err != nil {
		t.Fatal(err)
	}
	stack := swarmtest.Name(t, "metric")
	if _, err := b.ReadStacks(ctx, []string{stack}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.LiveServices(ctx, stack); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Releases(ctx, stack); err != nil {
		t.Fatal(err)
	}
	want := b.Stats().Requests
	if want["ping"] < 1 || want["service.list"] != 2 || want["config.list"] != 1 {
		t.Fatalf("backend counted %v, want a ping, two service listings and a config listing", want)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, f := range fams {
		if f.GetName() != "flotilla_docker_requests_total" {
			continue
		}
		for _, s := range f.Metric {
			labels := map[string]string{}
			for _, l := range s.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["swarm"] != "local" {
				t.Errorf("series with swarm %q, want local", labels["swarm"])
			}
			got[labels["op"]] = int(s.GetCounter().GetValue())
		}
	}
	if len(got) != len(want) {
		t.Errorf("metric has %v, backend counted %v", got, want)
	}
	for op, n := range want {
		if got[op] != n {
			t.Errorf("flotilla_docker_requests_total{op=%q} = %d, backend counted %d", op, got[op], n)
		}
	}
}

// The API version is negotiated once per backend, not once per conversion:
// every application's live drift asks for it, and a ping per application
// made a steady batch's requests grow with the number of applications.
func TestBackend_negotiatesTheAPIVersionOnceForEveryConversion(t *testing.T) {
	swarmtest.Need(t)
	ctx := context.Background()
	b, err := New(ctx, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// fieldsAPIVersion is what every conversion for live drift and every
	// deploy asks.
	for range 3 {
		b.fieldsAPIVersion(ctx)
	}
	b.WithOutOfBandNotifier(func(string) {}).(*Backend).fieldsAPIVersion(ctx)
	if n := b.Stats().Requests["ping"]; n != 1 {
		t.Errorf("four asks, by the backend and a per-application copy, pinged %d times, want 1: %v", n, b.Stats().Requests)
	}
	if v := b.APIVersion(); v == "" {
		t.Error("no API version after negotiating")
	}
}

// The client negotiates down to the daemon's API version, however old a
// daemon Flotilla supports (20.10 speaks 1.41), and up to its own newest for a
// daemon newer than it; the version it settles on is logged for the record.
func TestBackend_negotiatesTheDaemonsAPIVersion(t *testing.T) {
	swarmtest.Need(t)
	ctx := context.Background()
	b, err := New(ctx, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	got := b.apiVersion(ctx)
	sv, err := b.Client().ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := sv.APIVersion
	if apiversions.LessThan(client.MaxAPIVersion, want) {
		want = client.MaxAPIVersion
	}
	t.Logf("daemon at %s (engine %s, API %s, minimum %s): negotiated API %s", b.Client().DaemonHost(), sv.Version, sv.APIVersion, sv.MinAPIVersion, got)
	if got != want {
		t.Errorf("negotiated API %s with a daemon speaking %s, want %s", got, sv.APIVersion, want)
	}
	if apiversions.LessThan(got, compose.MinAPIVersion) {
		t.Errorf("negotiated API %s is older than the oldest Flotilla supports, %s", got, compose.MinAPIVersion)
	}
}
