package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/notify"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

// heldFetch holds every fetch until its context ends, so a pass is in
// flight for as long as the test wants.
type heldFetch struct{ fetching chan struct{} }

func (f heldFetch) Fetch(ctx context.Context, _ source.Request) (*source.Revision, error) {
	select {
	case f.fetching <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// unreadFile is an applications file the test never reloads.
type unreadFile struct{}

func (unreadFile) read(context.Context) ([]byte, string, string, error) {
	return nil, "", "", errors.New("not read in this test")
}

// A sync queued behind a pass in flight is answered by the stop. The API
// must already know it is stopping when that answer reaches it, or a client
// waiting on the sync gets "200 Failed" instead of the 503 the stop promises
// (CI saw this once: the passes' context ended with the signal, before
// Stopping closed). Without the fix this fails about two runs in three.
func TestAStopClosesStoppingBeforeAnyPassOrQueuedSyncIsAnswered(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	file, err := application.Parse("apps.yaml", []byte(reloadBase))
	if err != nil {
		t.Fatal(err)
	}
	fetch := heldFetch{fetching: make(chan struct{}, 1)}
	ctl, err := reconcile.New(reconcile.Options{Backend: chartstest.NewMinimal(), Fetcher: fetch, Logger: log}, file.Applications)
	if err != nil {
		t.Fatal(err)
	}
	notifier, err := notify.New(nil, notify.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	stopping := make(chan (<-chan struct{}), 1)
	r := &runner{
		opts:     &Options{Listen: "127.0.0.1:0", ShutdownTimeout: 30 * time.Second},
		ctl:      ctl,
		reloader: &reloader{src: unreadFile{}, ctl: ctl, log: log, now: time.Now},
		notifier: notifier,
		broker:   events.NewBroker(events.BrokerOptions{}),
		log:      log,
		apiLog:   log,
		handler: func(s <-chan struct{}) http.Handler {
			stopping <- s
			return http.NotFoundHandler()
		},
	}
	ctx, stop := context.WithCancelCause(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.run(ctx) }()

	select {
	case <-fetch.fetching:
	case <-time.After(time.Minute):
		t.Fatal("no pass started")
	}
	queued, err := ctl.RequestSync("shop", "test")
	if err != nil {
		t.Fatal(err)
	}
	stop(errors.New("terminated signal received"))

	res := <-queued
	stopped := <-stopping // the handler was built before any pass began
	select {
	case <-stopped:
	default:
		t.Fatal("the queued sync was answered before Stopping closed; the API would answer it 200 Failed instead of 503")
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "stopped before serving") {
		t.Errorf("queued sync answered %v, want the stop's refusal", res.Err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("run: %v", err)
	}
}
