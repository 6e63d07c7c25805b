package api_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// rawDo sends a request with exactly the headers given.
func (e *env) rawDo(t *testing.T, method, path string, h http.Header, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// What a browser can send without a CORS preflight (a form, or a fetch with
// a "simple" body) never reaches a write, even with authentication off.
func TestAPI_writesWithoutJSONAndTheRequestHeaderAreRefusedEvenWithoutAuth(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Tokens = nil; o.NoAuth = true })
	refused := []struct {
		name   string
		header http.Header
		body   string
		want   int
	}{
		{"form post", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "prune=true", http.StatusUnsupportedMediaType},
		{"text/plain fetch", http.Header{"Content-Type": {"text/plain"}}, `{"prune":true}`, http.StatusUnsupportedMediaType},
		{"no content type", http.Header{api.RequestHeader: {"1"}}, "", http.StatusUnsupportedMediaType},
		{"json without the header", http.Header{"Content-Type": {"application/json"}}, `{"prune":true}`, http.StatusForbidden},
	}
	for _, r := range refused {
		for _, path := range []string{"/api/v1/applications/shop/sync", "/api/v1/applications/shop/rollback", "/api/v1/applications/shop/refresh"} {
			if resp := e.rawDo(t, http.MethodPost, path, r.header, r.body); resp.StatusCode != r.want {
				t.Errorf("%s to %s: status %d, want %d", r.name, path, resp.StatusCode, r.want)
			}
		}
	}
	if got := e.ctl.Syncs(); len(got) != 0 {
		t.Fatalf("refused writes still requested syncs: %v", got)
	}
	if got := e.ctl.Refreshed(); len(got) != 0 {
		t.Fatalf("refused writes still refreshed: %v", got)
	}
	ok := http.Header{"Content-Type": {"application/json; charset=utf-8"}, api.RequestHeader: {"1"}}
	if resp := e.rawDo(t, http.MethodPost, "/api/v1/applications/shop/sync", ok, `{"prune":true}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a proper write: status %d", resp.StatusCode)
	}
	// Reads need neither.
	if resp := e.rawDo(t, http.MethodGet, "/api/v1/applications", http.Header{}, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("a plain read: status %d", resp.StatusCode)
	}
}

// recordingBody counts reads of a request body.
type recordingBody struct {
	r     io.Reader
	reads atomic.Int32
}

func (b *recordingBody) Read(p []byte) (int, error) {
	b.reads.Add(1)
	return b.r.Read(p)
}

func (b *recordingBody) Close() error { return nil }

func TestWebhook_bodyIsReadOnlyForAPlausibleDeliveryToAnEnabledProvider(t *testing.T) {
	body := fixture(t, "github-push.json")
	secrets := api.WebhookSecrets{api.ProviderGitHub: webhookSecret}
	ctl := &hookController{Controller: apitest.NewController(), targets: platformTargets("github.com")}
	h := api.New(api.Options{Controller: ctl, Metrics: metrics.New(), Logger: slog.New(slog.DiscardHandler),
		Webhooks: api.WebhookOptions{Secrets: secrets, MaxBody: 1 << 16}})
	signed := delivery(api.ProviderGitHub, webhookSecret, "d-1", body)
	unsigned := signed.Clone()
	unsigned.Del("X-Hub-Signature-256")
	cases := []struct {
		name     string
		provider string
		header   http.Header
		length   int64
		want     int
	}{
		{"unknown provider", "svn", signed, int64(len(body)), http.StatusNotFound},
		{"provider without a secret", "gitlab", delivery(api.ProviderGitLab, webhookSecret, "d-2", body), int64(len(body)), http.StatusNotFound},
		{"no signature header", "github", unsigned, int64(len(body)), http.StatusUnauthorized},
		{"declared too large", "github", signed, 1<<16 + 1, http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		rb := &recordingBody{r: bytes.NewReader(body)}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/webhooks/"+c.provider, nil)
		req.Body, req.ContentLength, req.Header = rb, c.length, c.header.Clone()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: status %d, want %d: %s", c.name, rec.Code, c.want, rec.Body)
		}
		if n := rb.reads.Load(); n != 0 {
			t.Errorf("%s: the body was read %d time(s) before the delivery was refused", c.name, n)
		}
	}
	// The control: a plausible delivery is read, verified and routed.
	rb := &recordingBody{r: bytes.NewReader(body)}
	req := httptest.NewRequest(http.MethodPost, "/api/v1/webhooks/github", nil)
	req.Body, req.ContentLength, req.Header = rb, int64(len(body)), signed.Clone()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code >= 300 || rb.reads.Load() == 0 {
		t.Fatalf("signed delivery: status %d after %d reads: %s", rec.Code, rb.reads.Load(), rec.Body)
	}
}

func TestWebhook_senderPastItsRateIs429WithRetryAfterAndOthersAreNotHeldUp(t *testing.T) {
	ctl := &hookController{Controller: apitest.NewController(), targets: platformTargets("github.com")}
	m := metrics.New()
	h := api.New(api.Options{Controller: ctl, Metrics: m, Logger: slog.New(slog.DiscardHandler),
		Webhooks: api.WebhookOptions{Secrets: api.WebhookSecrets{api.ProviderGeneric: webhookSecret}, RatePerSecond: 0.01, RateBurst: 2}})
	send := func(from string, n int) (*httptest.ResponseRecorder, *recordingBody) {
		body := []byte(`{"repository":"https://github.com/acme/other.git","ref":"main","id":"d-` + from + string(rune('a'+n)) + `"}`)
		rb := &recordingBody{r: bytes.NewReader(body)}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/webhooks/generic", nil)
		req.Body, req.ContentLength = rb, int64(len(body))
		req.Header = delivery(api.ProviderGeneric, webhookSecret, "", body)
		req.RemoteAddr = from + ":40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec, rb
	}
	for i := range 2 {
		if rec, _ := send("192.0.2.7", i); rec.Code >= 300 {
			t.Fatalf("delivery %d within the burst: status %d: %s", i, rec.Code, rec.Body)
		}
	}
	rec, rb := send("192.0.2.7", 2)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("delivery past the burst: status %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rb.reads.Load() != 0 {
		t.Error("a rate-limited delivery's body was read")
	}
	if rec, _ := send("198.51.100.9", 0); rec.Code >= 300 {
		t.Fatalf("another sender: status %d", rec.Code)
	}
}

// startServer serves h through the controller's real server settings.
func startServer(t *testing.T, h http.Handler, to api.Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(h, to, slog.New(slog.DiscardHandler))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// slowClient writes chunks with a pause between them, then reads whatever
// the server answers, and reports whether the server cut it off before it
// had sent everything.
func slowClient(t *testing.T, addr string, chunks []string, pause time.Duration) (cut bool, answer string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, ch := range chunks {
		if _, err := io.WriteString(c, ch); err != nil {
			cut = true
			break
		}
		time.Sleep(pause)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	return cut, string(b)
}

func TestServer_slowlorisHeadersAndBodiesAreCutOff(t *testing.T) {
	ctl := apitest.NewController(apitest.Sample()...)
	h := api.New(api.Options{Controller: ctl, NoAuth: true, Logger: slog.New(slog.DiscardHandler)})
	addr := startServer(t, h, api.Timeouts{Read: 300 * time.Millisecond, Write: time.Second, Idle: time.Second})

	// Headers one line at a time, 200ms apart: 2s in all, past the 300ms.
	headers := []string{"GET /healthz HTTP/1.1\r\n", "Host: localhost\r\n"}
	for range 8 {
		headers = append(headers, "X-Slow: 1\r\n")
	}
	headers = append(headers, "\r\n")
	started := time.Now()
	cut, answer := slowClient(t, addr, headers, 200*time.Millisecond)
	if strings.Contains(answer, "200 OK") {
		t.Fatalf("slow headers were served: %q", answer)
	}
	t.Logf("slow headers: cut=%v after %s, answer %q", cut, time.Since(started).Round(time.Millisecond), firstLine(answer))

	// A complete request head, then the body a byte at a time.
	body := `{"prune":true}`
	chunks := []string{"POST /api/v1/applications/shop/sync HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
		api.RequestHeader + ": 1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"}
	for _, b := range body {
		chunks = append(chunks, string(b))
	}
	_, answer = slowClient(t, addr, chunks, 150*time.Millisecond)
	if strings.Contains(answer, "202 Accepted") {
		t.Fatalf("a body sent over 2s was accepted: %q", answer)
	}
	if got := ctl.Syncs(); len(got) != 0 {
		t.Fatalf("a slow body still requested a sync: %v", got)
	}
	t.Logf("slow body: answer %q", firstLine(answer))
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\r\n"); return l }

// The event stream and a waited sync outlive the server's read and write
// timeouts, which still bound every other request.
func TestServer_eventStreamsAndWaitedSyncsOutliveTheTimeouts(t *testing.T) {
	ctl := apitest.NewController(apitest.Sample()...)
	broker := events.NewBroker(events.BrokerOptions{})
	ctl.Events = broker
	hold := make(chan struct{})
	ctl.Hold = hold
	h := api.New(api.Options{Controller: ctl, Events: broker, NoAuth: true, Heartbeat: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	addr := startServer(t, h, api.Timeouts{Read: 200 * time.Millisecond, Write: 200 * time.Millisecond, Idle: time.Second})

	resp, err := http.Get("http://" + addr + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	waited := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/applications/shop/sync?wait=true&timeout=1m", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.RequestHeader, "1")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			waited <- err.Error()
			return
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		waited <- r.Status + " " + string(b)
	}()
	time.Sleep(time.Second) // five times both timeouts
	broker.Publish(events.Event{Type: events.SyncStarted, App: "shop", Message: "late"})
	close(hold)
	found := false
	for lines.Scan() {
		if strings.Contains(lines.Text(), `"late"`) {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("the event stream ended before an event published after the timeouts: %v", lines.Err())
	}
	if got := <-waited; !strings.HasPrefix(got, "200") || !strings.Contains(got, "Succeeded") {
		t.Fatalf("waited sync: %s", got)
	}
}

func TestAPI_readyzAnswers503WithinItsDeadlineWhenTheCheckHangs(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	checks := map[string]func(context.Context) error{
		// A check that honours its context, such as a Docker call.
		"honours its context": func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
		// One that does not: the probe must not wait for it either.
		"ignores its context": func(context.Context) error { <-release; return nil },
	}
	for name, check := range checks {
		e := newEnv(t, func(o *api.Options) { o.Ready = check; o.ReadyTimeout = 200 * time.Millisecond })
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/readyz", nil)
		resp, err := e.srv.Client().Do(req)
		cancel()
		if err != nil {
			t.Fatalf("%s: /readyz did not answer: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "did not answer within 200ms") {
			t.Errorf("%s: status %d: %s", name, resp.StatusCode, b)
		}
	}
}

// Stopping ends what a graceful Shutdown would otherwise wait on for
// minutes: open event streams and syncs waiting for their pass.
func TestAPI_stoppingEndsEventStreamsAndWaitedSyncs(t *testing.T) {
	stopping := make(chan struct{})
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	e := newEnv(t, func(o *api.Options) { o.Stopping = stopping; o.Heartbeat = time.Hour })
	e.ctl.Hold = hold

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamEnded := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); streamEnded <- err }()
	waited := make(chan int, 1)
	go func() {
		r, _ := e.do(t, http.MethodPost, "/api/v1/applications/shop/sync?wait=true&timeout=5m", adminToken, "{}")
		waited <- r.StatusCode
	}()
	time.Sleep(200 * time.Millisecond)
	close(stopping)
	select {
	case err := <-streamEnded:
		if err != nil {
			t.Fatalf("event stream ended with %v, want a clean end", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream stayed open after Stopping closed")
	}
	select {
	case code := <-waited:
		if code != http.StatusServiceUnavailable {
			t.Fatalf("waited sync: status %d, want 503", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waited sync was still waiting after Stopping closed")
	}
}
