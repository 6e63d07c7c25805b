package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/client"
	"github.com/flotilla-gitops/flotilla/events"
)

const (
	adminToken = "admin-0123456789abcdef"
	readToken  = "read-0123456789abcdef"
)

type env struct {
	srv    *httptest.Server
	ctl    *apitest.Controller
	broker *events.Broker
}

func newEnv(t *testing.T, opts events.BrokerOptions) *env {
	t.Helper()
	e := &env{ctl: apitest.NewController(apitest.Sample()...), broker: events.NewBroker(opts)}
	e.ctl.Events = e.broker
	e.srv = httptest.NewServer(api.New(api.Options{
		Controller: e.ctl,
		Events:     e.broker,
		Logger:     slog.New(slog.DiscardHandler),
		Tokens: api.Tokens{
			{Name: "admin", Role: access.Admin, Secret: adminToken},
			{Name: "read", Role: access.Viewer, Secret: readToken},
		},
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) client(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.New(e.srv.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNew_rejectsBadServers(t *testing.T) {
	for _, s := range []string{"", "127.0.0.1:8080", "ftp://host", "https://user:pw@host"} {
		if _, err := client.New(s, "", nil); err == nil {
			t.Errorf("New(%q) accepted", s)
		}
	}
}

func TestClient_everyRoute(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	e.ctl.SetHistory("shop", []charts.Release{{Name: "shop", Revision: 7}, {Name: "shop", Revision: 6}})
	e.ctl.SetDiff("shop", api.Diff{Services: []api.ServiceDiff{{Name: "web", Change: api.ServiceDrift}}})
	c := e.client(t, adminToken)
	ctx := t.Context()

	list, err := c.Applications(ctx)
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("Applications = %+v, %v", list, err)
	}
	st, err := c.Application(ctx, "shop")
	if err != nil || st.Name != "shop" || len(st.Services) != 2 {
		t.Fatalf("Application = %+v, %v", st, err)
	}
	h, err := c.History(ctx, "shop")
	if err != nil || len(h.Items) != 2 {
		t.Fatalf("History = %+v, %v", h, err)
	}
	d, err := c.Diff(ctx, "shop")
	if err != nil || len(d.Services) != 1 {
		t.Fatalf("Diff = %+v, %v", d, err)
	}
	r, err := c.Sync(ctx, "shop", api.SyncBody{Prune: true}, client.Wait{Wait: true, Timeout: time.Minute})
	if err != nil || r.Phase != api.Succeeded {
		t.Fatalf("Sync = %+v, %v", r, err)
	}
	if s := e.ctl.Syncs(); len(s) != 1 || !s[0].Prune {
		t.Fatalf("syncs = %+v", s)
	}
	r, err = c.Rollback(ctx, "shop", 6, client.Wait{})
	if err != nil || r.Phase != api.Queued {
		t.Fatalf("Rollback = %+v, %v", r, err)
	}
	r, err = c.Refresh(ctx, "billing")
	if err != nil || r.Phase != api.Queued {
		t.Fatalf("Refresh = %+v, %v", r, err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready = %v", err)
	}
}

func TestClient_errorsSayWhatToDo(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	ctx := t.Context()

	_, err := e.client(t, "").Applications(ctx)
	if !client.IsStatus(err, 401) || !strings.Contains(err.Error(), "FLOTILLA_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
	_, err = e.client(t, readToken).Sync(ctx, "shop", api.SyncBody{}, client.Wait{})
	// The API says which role the request needs; no guess is added.
	if !client.IsStatus(err, 403) || !strings.Contains(err.Error(), "needs operator") || strings.Contains(err.Error(), "read-only") {
		t.Fatalf("read token sync: %v", err)
	}
	_, err = e.client(t, readToken).Application(ctx, "nope")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != 404 || ce.Code != api.CodeNotFound || !strings.Contains(ce.Message, "app list") {
		t.Fatalf("unknown app: %#v", err)
	}

	dead, err := client.New("http://127.0.0.1:1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.Applications(ctx); err == nil || !strings.Contains(err.Error(), "FLOTILLA_SERVER") {
		t.Fatalf("unreachable: %v", err)
	}
}

// A 503 the API explains (logs withheld, a controller stopping or standing
// by) is shown as the API put it; the guess "not ready yet" is kept for a
// bare 503, such as a proxy's in front of a controller that is down.
func TestClient_anExplainedUnavailableAnswerGetsNoGuessedHint(t *testing.T) {
	explained := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"code":"unavailable","message":"service logs are withheld: the secret values could not be reproduced"}`))
	}))
	defer explained.Close()
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream down", http.StatusServiceUnavailable)
	}))
	defer bare.Close()

	c, err := client.New(explained.URL, adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Applications(t.Context())
	if !client.IsStatus(err, 503) || !strings.Contains(err.Error(), "withheld") || strings.Contains(err.Error(), "not ready") {
		t.Fatalf("explained 503: %v", err)
	}
	c, err = client.New(bare.URL, adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = c.Applications(t.Context()); !client.IsStatus(err, 503) || !strings.Contains(err.Error(), "not ready yet") {
		t.Fatalf("bare 503: %v", err)
	}
}

func recv(t *testing.T, ch <-chan events.Event) events.Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("event channel closed")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return events.Event{}
}

func TestClient_eventsReconnectWithLastEventID(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := e.client(t, readToken).Events(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitSubscribers(t, e.broker, 1)
	e.broker.Publish(events.Event{Type: events.SyncStarted, App: "shop"})
	if got := recv(t, ch); got.ID != 1 || got.Type != events.SyncStarted {
		t.Fatalf("got %+v", got)
	}

	// The connection drops; what is published meanwhile arrives after the
	// client reconnects on its own.
	e.srv.CloseClientConnections()
	waitSubscribers(t, e.broker, 0)
	e.broker.Publish(events.Event{Type: events.SyncSucceeded, App: "shop"})
	e.broker.Publish(events.Event{Type: events.Pruned, App: "shop"})
	for _, want := range []uint64{2, 3} {
		if got := recv(t, ch); got.ID != want {
			t.Fatalf("after reconnect got id %d, want %d", got.ID, want)
		}
	}
	cancel()
	for range ch {
	}
}

func TestClient_eventsSurviveBeingCutOffForLagging(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{QueueSize: 4, BufferSize: 1024})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := e.client(t, readToken).Events(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitSubscribers(t, e.broker, 1)
	const n = 500
	for range n {
		e.broker.Publish(events.Event{Type: events.HealthChanged})
	}
	for want := uint64(1); want <= n; want++ {
		got := recv(t, ch)
		if got.Type == events.Gap {
			t.Fatalf("gap at %d although the ring holds everything", want)
		}
		if got.ID != want {
			t.Fatalf("got id %d, want %d", got.ID, want)
		}
	}
}

func TestClient_appEventsFilter(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	ch, err := e.client(t, readToken).AppEvents(t.Context(), "shop", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitSubscribers(t, e.broker, 1)
	e.broker.Publish(events.Event{Type: events.SyncStarted, App: "billing"})
	e.broker.Publish(events.Event{Type: events.SyncStarted, App: "shop"})
	if got := recv(t, ch); got.App != "shop" {
		t.Fatalf("got %+v", got)
	}
}

func TestClient_eventsNeedAToken(t *testing.T) {
	e := newEnv(t, events.BrokerOptions{})
	if _, err := e.client(t, "").Events(t.Context(), 0); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("err = %v", err)
	}
}

func waitSubscribers(t *testing.T, b *events.Broker, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.Subscribers() != n {
		if time.Now().After(deadline) {
			t.Fatalf("subscribers = %d, want %d", b.Subscribers(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Every write the client makes carries what the API's write guard demands:
// a JSON content type, even with no body, and the request header.
func TestClient_writesCarryJSONAndTheRequestHeader(t *testing.T) {
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			seen = append(seen, r.Header.Clone())
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"app":"shop","phase":"Queued"}`))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Sync(ctx, "shop", api.SyncBody{Prune: true}, client.Wait{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rollback(ctx, "shop", 3, client.Wait{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refresh(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 {
		t.Fatalf("saw %d writes, want 3", len(seen))
	}
	for i, h := range seen {
		if h.Get("Content-Type") != "application/json" || h.Get(api.RequestHeader) == "" {
			t.Errorf("write %d: Content-Type %q, %s %q", i, h.Get("Content-Type"), api.RequestHeader, h.Get(api.RequestHeader))
		}
	}
}
