package backend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// deployTalkers deploys a stack of two long-running services that print
// their environment on start, each with its own marker.
func deployTalkers(t *testing.T, b *Backend, stack string) {
	t.Helper()
	swarmtest.Cleanup(t, stack)
	dir := t.TempDir()
	file := `version: "3.8"
services:
  web:
    image: ` + swarmtest.Image + `
    environment: {MARK: web-says-hello}
  worker:
    image: ` + swarmtest.Image + `
    environment: {MARK: worker-says-hello}
`
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := compose.Render(stack, compose.Dir{Root: dir, Files: []string{"compose.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.DeployStack(context.Background(), charts.DeployRequest{Stack: stack, Manifest: r.Manifest}); err != nil {
		t.Fatal(err)
	}
}

func collect(ctx context.Context, b *Backend, stack string, q capability.LogQuery) ([]capability.LogLine, error) {
	var out []capability.LogLine
	err := b.StackLogs(ctx, stack, q, func(l capability.LogLine) error {
		out = append(out, l)
		return nil
	})
	return out, err
}

func marked(lines []capability.LogLine) map[string]capability.LogLine {
	out := map[string]capability.LogLine{}
	for _, l := range lines {
		if strings.Contains(l.Text, "MARK=") {
			out[l.Service] = l
		}
	}
	return out
}

func TestStackLogsReadEveryServiceOneServiceOrOneTaskOfTheStackOnly(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "slogs")
	deployTalkers(t, b, stack)
	ctx := context.Background()

	var all []capability.LogLine
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		var err error
		all, err = collect(ctx, b, stack, capability.LogQuery{Tail: 100, Timestamps: true})
		if err != nil {
			return false, err.Error()
		}
		return len(marked(all)) == 2, "markers not yet in both services' logs"
	})
	m := marked(all)
	for svc, want := range map[string]string{"web": "MARK=web-says-hello", "worker": "MARK=worker-says-hello"} {
		l := m[svc]
		if !strings.HasSuffix(l.Text, want) || l.Task == "" || l.Node == "" || l.Time.IsZero() {
			t.Errorf("%s's line %+v: want text ending %q with task, node and time", svc, l, want)
		}
		if strings.Contains(l.Text, "com.docker.swarm") {
			t.Errorf("the daemon's details are left in the text: %q", l.Text)
		}
	}

	web, err := collect(ctx, b, stack, capability.LogQuery{Service: "web", Tail: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range web {
		if l.Service != "web" {
			t.Fatalf("?service=web gave a line of %s: %+v", l.Service, l)
		}
		if !l.Time.IsZero() {
			t.Fatalf("a time without timestamps: %+v", l)
		}
	}
	if len(web) == 0 || len(web) >= len(all) {
		t.Fatalf("web alone: %d lines of %d", len(web), len(all))
	}
	tail, err := collect(ctx, b, stack, capability.LogQuery{Service: "web", Tail: 2})
	if err != nil || len(tail) != 2 {
		t.Fatalf("tail 2: %d lines, %v", len(tail), err)
	}

	task := m["worker"].Task
	one, err := collect(ctx, b, stack, capability.LogQuery{Task: task, Tail: 100})
	if err != nil || len(one) == 0 {
		t.Fatalf("task %s: %d lines, %v", task, len(one), err)
	}
	for _, l := range one {
		if l.Task != task || l.Service != "worker" {
			t.Fatalf("task %s gave %+v", task, l)
		}
	}

	// Another stack's task, or a service or task that is not there, is
	// refused rather than read.
	other := swarmtest.Name(t, "slogso")
	deployTalkers(t, b, other)
	var otherTask string
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		ls, err := collect(ctx, b, other, capability.LogQuery{Service: "web", Tail: 1})
		if err != nil || len(ls) == 0 {
			return false, "no line yet"
		}
		otherTask = ls[0].Task
		return true, ""
	})
	for _, q := range []capability.LogQuery{{Task: otherTask}, {Service: "nope"}, {Task: "nosuchtask0123456789abcdef"}} {
		if _, err := collect(ctx, b, stack, q); !errors.Is(err, capability.ErrNoLogSource) {
			t.Errorf("%+v: %v, want ErrNoLogSource", q, err)
		}
	}
}

// Not parallel, so that the goroutines counted are this test's own.
func TestStackLogsFollowEndsAndLeavesNoGoroutineWhenItsContextEnds(t *testing.T) {
	b := newBackend(t)
	stack := swarmtest.Name(t, "flogs")
	deployTalkers(t, b, stack)
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		ls, err := collect(context.Background(), b, stack, capability.LogQuery{Tail: 100})
		return err == nil && len(marked(ls)) == 2, "markers not yet logged"
	})
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		// The daemon client keeps idle connections for its next request.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan capability.LogLine, 1000)
	done := make(chan error, 1)
	go func() {
		done <- b.StackLogs(ctx, stack, capability.LogQuery{Tail: 100, Follow: true}, func(l capability.LogLine) error {
			got <- l
			return nil
		})
	}()
	seen := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(seen) < 2 {
		select {
		case l := <-got:
			if strings.Contains(l.Text, "MARK=") {
				seen[l.Service] = true
			}
		case err := <-done:
			t.Fatalf("a followed read ended by itself: %v", err)
		case <-deadline:
			t.Fatalf("followed read saw markers of %v only", seen)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("a followed read ended before its context: %v", err)
	case <-time.After(time.Second):
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a followed read cancelled by its caller reports %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a followed read still runs 10s after its context ended")
	}
}
