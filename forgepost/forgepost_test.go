package forgepost_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/forgepost"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
	"github.com/flotilla-gitops/flotilla/internal/syncbuf"
)

const secret = "tok-3c1f9a-very-secret"

// logBuffer collects log output from several goroutines.
type logBuffer = syncbuf.Buffer

func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs a Poster for apps on a new broker until the test ends.
func start(t *testing.T, opts forgepost.Options, apps ...application.Application) (*forgepost.Poster, *events.Broker) {
	t.Helper()
	by := map[string]application.Application{}
	for _, a := range apps {
		by[a.Name] = a
	}
	opts.Apps = func(name string) (application.Application, bool) { a, ok := by[name]; return a, ok }
	p, err := forgepost.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	b := events.NewBroker(events.BrokerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx, b); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for b.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	return p, b
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func app(name string, f application.Forge, statuses bool, pr string) application.Application {
	return application.Application{Name: name, Stack: name, Source: application.Source{RepoURL: "https://git.example.com/ann/web.git"},
		Feedback: &application.Feedback{Forge: &f, Statuses: statuses, PullRequest: pr}}
}

const commitA = "1111111111111111111111111111111111111111"

// A forge that answers 500 to everything, or hangs, never holds up the
// event stream (the pass publishes and goes on), costs a few retries and
// a warning that names the application but never the token, and is
// counted as failed.
func TestPoster_aForgeThatFailsDoesNotBlock(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Authorization") != "token "+secret {
			t.Errorf("authorization %q", r.Header.Get("Authorization"))
		}
		http.Error(w, `{"message":"internal error `+secret+`"}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer hang.Close()
	defer close(stop)
	logs := &logBuffer{}
	f := application.Forge{Kind: forge.GitHub, API: srv.URL, Repo: "ann/web", TokenFile: tokenFile(t, secret)}
	h := application.Forge{Kind: forge.Gitea, API: hang.URL + "/api/v1", Repo: "ann/web", TokenFile: tokenFile(t, secret)}
	p, b := start(t, forgepost.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RetryAfter: time.Millisecond, Timeout: 300 * time.Millisecond},
		app("web", f, true, "7"), app("api", h, true, ""))

	began := time.Now()
	for i := range 50 {
		sha := fmt.Sprintf("%040x", i+1)
		b.Publish(events.Event{Type: events.SyncStarted, App: "web", Revision: sha})
		b.Publish(events.Event{Type: events.SyncStarted, App: "api", Revision: sha})
		b.Publish(events.Event{Type: events.SyncSucceeded, App: "web", Revision: sha, Message: "revision 1 deployed"})
	}
	if d := time.Since(began); d > time.Second {
		t.Fatalf("publishing took %s: the poster held up the stream", d)
	}
	waitFor(t, "the failures to be counted", func() bool { return p.Stats().Failed >= 3 })
	if hits.Load() < 3 {
		t.Fatalf("%d requests: a failing post was not retried", hits.Load())
	}
	out := logs.String()
	if strings.Contains(out, secret) {
		t.Fatalf("the token is in the log:\n%s", out)
	}
	if !strings.Contains(out, "forge feedback not posted; the deploy is not affected") || !strings.Contains(out, "app=web") {
		t.Fatalf("no warning naming the application:\n%s", out)
	}
}

// Statuses follow a deploy: pending, then success; a repeat is not posted
// again; a later pass's transient failure at a deployed commit leaves its
// status alone; a stalled failure (the commit does not render) is posted.
func TestPoster_statusesFollowTheDeploy(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body strings.Builder
		_, _ = fmt.Fprint(&body, r.Method, " ", r.URL.Path)
		buf := new(bytes.Buffer)
		_, _ = buf.ReadFrom(r.Body)
		mu.Lock()
		got = append(got, body.String()+" "+buf.String())
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":1}`))
	}))
	defer srv.Close()
	f := application.Forge{Kind: forge.GitHub, API: srv.URL, Repo: "ann/web", TokenFile: tokenFile(t, secret)}
	p, b := start(t, forgepost.Options{ConsoleURL: "https://flotilla.example.com/"}, app("web", f, true, ""))
	commitB := strings.Repeat("2", 40)
	b.Publish(events.Event{Type: events.SyncStarted, App: "web", Revision: commitA, Message: "deploying revision 1 (install)"})
	b.Publish(events.Event{Type: events.SyncSucceeded, App: "web", Revision: commitA, Message: "revision 1 deployed (webhook)"})
	b.Publish(events.Event{Type: events.SyncSucceeded, App: "web", Revision: commitA, Message: "revision 1 deployed (webhook)"})
	b.Publish(events.Event{Type: events.SyncFailed, App: "web", Revision: commitA, Message: "observe: daemon unreachable", Data: map[string]any{"kind": "transient"}})
	b.Publish(events.Event{Type: events.SyncFailed, App: "web", Revision: commitB, Message: "render: compose.yaml: bad", Data: map[string]any{"kind": "stalled"}})
	b.Publish(events.Event{Type: events.SyncFailed, App: "other", Revision: commitB})
	waitFor(t, "three statuses", func() bool { return p.Stats().Posted == 3 })
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("requests %q", got)
	}
	for i, want := range []string{
		"POST /repos/ann/web/statuses/" + commitA + ` {"context":"flotilla/web","description":"deploying 111111111111: deploying revision 1 (install)","state":"pending","target_url":"https://flotilla.example.com/ui/#/app/web"}`,
		"POST /repos/ann/web/statuses/" + commitA + ` {"context":"flotilla/web","description":"deployed 111111111111: revision 1 deployed (webhook)","state":"success","target_url":"https://flotilla.example.com/ui/#/app/web"}`,
		"POST /repos/ann/web/statuses/" + commitB + ` {"context":"flotilla/web","description":"deploy of 222222222222 failed: render: compose.yaml: bad","state":"failure","target_url":"https://flotilla.example.com/ui/#/app/web"}`,
	} {
		if got[i] != want {
			t.Errorf("request %d:\n got %s\nwant %s", i, got[i], want)
		}
	}
}

// Against a real Gitea, through the event stream: a deploy's statuses go
// pending -> success on its commit, a failed deploy's pending -> failure,
// and the plan comment on the pull request is created once and edited in
// place on the next push, with the new plan.
func TestPoster_againstARealGitea(t *testing.T) {
	g := forgetest.StartGitea(t)
	g.CreateRepo("web")
	g.Write("ann", "ann/web", "", "main", "compose.yaml", "services: {}\n")
	one := g.Write("ann", "ann/web", "main", "change-1", "compose.yaml", "services: {web: {image: a}}\n")
	n := g.OpenPR("ann", "web", "change-1")
	logs := &logBuffer{}
	token := g.Token("ann")
	f := application.Forge{Kind: forge.Gitea, API: g.API(), Repo: "ann/web", TokenFile: tokenFile(t, token)}
	plan := func(_ context.Context, app, commit string, deployed bool) (string, error) {
		return fmt.Sprintf("plan of %s at %s (deployed %v)\n", app, commit[:7], deployed), nil
	}
	p, b := start(t, forgepost.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Plan: plan, ConsoleURL: "https://flotilla.example.com"}, app("web", f, true, fmt.Sprint(n)))

	b.Publish(events.Event{Type: events.SyncStarted, App: "web", Revision: one})
	b.Publish(events.Event{Type: events.SyncSucceeded, App: "web", Revision: one, Message: "revision 1 deployed (poll)"})
	waitFor(t, "the first deploy's posts", func() bool { return p.Stats().Posted == 3 })
	if s := g.CombinedState("ann/web", one); s != "success" {
		t.Fatalf("state of %s: %q", one, s)
	}
	if st := g.Statuses("ann/web", one); len(st) != 2 || st[0].TargetURL != "https://flotilla.example.com/ui/#/app/web" {
		t.Fatalf("statuses of %s: %+v", one, st)
	}

	two := g.Write("ann", "ann/web", "change-1", "change-1", "compose.yaml", "services: {web: {image: b}}\n")
	b.Publish(events.Event{Type: events.SyncStarted, App: "web", Revision: two})
	b.Publish(events.Event{Type: events.SyncFailed, App: "web", Revision: two, Message: "apply: guard refused web: bind mount /etc", Data: map[string]any{"kind": "stalled"}})
	waitFor(t, "the second deploy's posts", func() bool { return p.Stats().Posted == 6 })
	if s := g.CombinedState("ann/web", two); s != "failure" {
		t.Fatalf("state of %s: %q", two, s)
	}
	var ours []forgetest.Comment
	for _, c := range g.Comments("web", n) {
		if strings.HasPrefix(c.Body, forge.PlanMarker("web")) {
			ours = append(ours, c)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d comments with the marker, want 1: %+v", len(ours), ours)
	}
	if body := ours[0].Body; !strings.Contains(body, "plan of web at "+two[:7]+" (deployed false)") || !strings.Contains(body, "guard refused web") || strings.Contains(body, one[:7]) {
		t.Fatalf("comment not edited to the second push:\n%s", body)
	}
	if strings.Contains(logs.String(), token) {
		t.Fatalf("the token is in the log:\n%s", logs)
	}
	if p.Stats().Failed != 0 {
		t.Fatalf("failures: %+v\n%s", p.Stats(), logs)
	}
}

// Two applications on one forge share its queue and token bucket, but each
// post carries its own application's token and repository.
func TestPoster_applicationsOnOneForgeKeepTheirOwnTokens(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	a := application.Forge{Kind: forge.GitHub, API: srv.URL, Repo: "ann/a", TokenFile: tokenFile(t, "token-a")}
	b := application.Forge{Kind: forge.GitHub, API: srv.URL, Repo: "bob/b", TokenFile: tokenFile(t, "token-b")}
	p, br := start(t, forgepost.Options{}, app("a", a, true, ""), app("b", b, true, ""))
	br.Publish(events.Event{Type: events.SyncStarted, App: "a", Revision: commitA})
	br.Publish(events.Event{Type: events.SyncStarted, App: "b", Revision: commitA})
	waitFor(t, "two statuses", func() bool { return p.Stats().Posted == 2 })
	mu.Lock()
	defer mu.Unlock()
	if seen["/repos/ann/a/statuses/"+commitA] != "token token-a" || seen["/repos/bob/b/statuses/"+commitA] != "token token-b" {
		t.Fatalf("requests %v", seen)
	}
}
