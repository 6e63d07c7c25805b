package e2e

import (
	"context"
	"crypto/rand"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/chartrepo"
	"github.com/flotilla-gitops/flotilla/chartrepo/chartrepotest"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/source"
)

// chartServer is a chart repository on 127.0.0.1: a directory of
// archives packaged by chartengine and an index.yaml built by
// chartrepo.BuildIndex, served by net/http until stopped.
type chartServer struct {
	t   *testing.T
	dir string
	url string
	srv *http.Server
}

func newChartServer(t *testing.T) *chartServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &chartServer{t: t, dir: t.TempDir(), url: "http://" + ln.Addr().String() + "/stable"}
	s.srv = &http.Server{Handler: http.StripPrefix("/stable", http.FileServer(http.Dir(s.dir))), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// publish packages version of the "greeter" chart, whose one service says
// its chart version, and rebuilds the index.
func (s *chartServer) publish(version string) {
	s.t.Helper()
	chartrepotest.Publish(s.t, s.dir, "greeter", map[string]string{
		"greeter/Chart.yaml":  "apiVersion: v2\nname: greeter\nversion: " + version + "\nappVersion: \"1\"\n",
		"greeter/values.yaml": "replicas: 1\n",
		"greeter/templates/web.yaml": `services:
  web:
    image: flotilla-test/app:1
    command: ["serve", ":8080"]
    environment:
      APP_MESSAGE: "chart {{ .Chart.Version }}"
    stop_grace_period: 1s
    deploy:
      replicas: {{ .Values.replicas }}
`,
	})
}

func TestChartFromARepositoryFollowsItsConstraintAndRollsBackWithTheRepositoryStopped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	repo := newChartServer(t)
	repo.publish("1.0.0")
	h.app.Source = application.Source{Revision: "HEAD", Path: ".",
		Chart: &application.Chart{RepoURL: repo.url, Name: "greeter", Version: "~1.0", Insecure: true}}
	cl, err := chartrepo.New(chartrepo.Options{CacheDir: filepath.Join(h.cache, "charts"), BackoffMin: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := reconcile.New(reconcile.Options{
		ControllerID: h.id,
		Backend:      h.backend,
		Fetcher:      source.New(source.Options{CacheDir: filepath.Join(h.cache, "git"), Logger: quiet}),
		Charts:       cl,
		Logger:       quiet,
		Tick:         50 * time.Millisecond,
	}, []application.Application{h.app})
	if err != nil {
		t.Fatal(err)
	}
	message := func() string {
		for _, e := range h.services()["web"].Spec.TaskTemplate.ContainerSpec.Env {
			if m, ok := strings.CutPrefix(e, "APP_MESSAGE="); ok {
				return m
			}
		}
		return ""
	}

	res := h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Install || res.Status.Revision != "greeter@1.0.0" {
		t.Fatalf("install: %+v", res)
	}
	h.waitRunning(1)
	if m := message(); m != "chart 1.0.0" {
		t.Fatalf("web says %q", m)
	}

	// A newer version inside the constraint is deployed on the next pass.
	repo.publish("1.0.3")
	res = h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Upgrade || res.Revision != 2 || res.Status.Revision != "greeter@1.0.3" {
		t.Fatalf("newer matching version: %+v", res)
	}
	if m := message(); m != "chart 1.0.3" {
		t.Fatalf("web says %q", m)
	}
	rs, err := h.backend.Releases(t.Context(), h.app.Stack)
	if err != nil || rs[0].Chart == nil || rs[0].Chart.Name != "greeter" || rs[0].Chart.Version != "1.0.3" || rs[0].Commit != "greeter@1.0.3" {
		t.Fatalf("record of the upgrade: %+v %v", rs[0], err)
	}

	// A version outside it is not: nothing is written.
	repo.publish("2.0.0")
	stats := h.backend.Stats()
	res = h.reconcile(ctl)
	if res.Err != nil || res.Action != charts.Unchanged {
		t.Fatalf("non-matching version: %+v", res)
	}
	if d := h.backend.Stats().Sub(stats); d.Writes != 0 {
		t.Fatalf("non-matching version wrote: %v", d.Requests)
	}

	// The repository stops; a rollback to revision 1 still redeploys it
	// exactly, from the record.
	repo.srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ctl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	ch, err := ctl.Rollback(h.app.Name, 1, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case res = <-ch:
	case <-time.After(60 * time.Second):
		t.Fatal("rollback not served")
	}
	if res.Err != nil || res.Revision != 3 {
		t.Fatalf("rollback with the repository stopped: %+v", res)
	}
	if m := message(); m != "chart 1.0.0" {
		t.Fatalf("after rollback web says %q", m)
	}
	rs, _ = h.backend.Releases(t.Context(), h.app.Stack)
	if rs[0].Manifest != rs[2].Manifest || rs[0].Chart.Version != "1.0.0" {
		t.Fatalf("revision 3 is not revision 1: %+v", rs[0])
	}
}

func TestBadInputFromAChartRepositoryGivesItsErrorAndWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	repo := newChartServer(t)
	repo.publish("1.0.0")
	h.app.Source = application.Source{Revision: "HEAD", Path: ".",
		Chart: &application.Chart{RepoURL: repo.url, Name: "greeter", Version: "~1.0", Insecure: true}}
	cl, err := chartrepo.New(chartrepo.Options{CacheDir: filepath.Join(h.cache, "charts"), MaxArchiveBytes: 16 << 10,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := reconcile.New(reconcile.Options{
		ControllerID: h.id, Backend: h.backend, Charts: cl, Logger: quiet, Tick: 50 * time.Millisecond,
		Fetcher: source.New(source.Options{CacheDir: filepath.Join(h.cache, "git"), Logger: quiet}),
	}, []application.Application{h.app})
	if err != nil {
		t.Fatal(err)
	}
	if res := h.reconcile(ctl); res.Err != nil || res.Status.Revision != "greeter@1.0.0" {
		t.Fatalf("install: %+v", res)
	}
	h.waitRunning(1)
	running := versions(h.services())

	for _, b := range []struct {
		name      string
		break_    func()
		transient bool
		wants     []string
	}{
		{"digest mismatch", func() {
			repo.publish("1.0.1")
			// The archive is swapped after the index named its digest.
			data, err := os.ReadFile(filepath.Join(repo.dir, "greeter-1.0.0.tgz"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(repo.dir, "greeter-1.0.1.tgz"), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, false, []string{"archive digest mismatch", "greeter 1.0.1", repo.url}},
		{"oversize archive", func() {
			os.Remove(filepath.Join(repo.dir, "greeter-1.0.1.tgz")) // the index is rebuilt without the swapped one
			blob := make([]byte, 64<<10)
			rand.Read(blob)
			chartrepotest.Publish(t, repo.dir, "greeter", map[string]string{
				"greeter/Chart.yaml":         "apiVersion: v2\nname: greeter\nversion: 1.0.2\n",
				"greeter/files/blob.bin":     string(blob),
				"greeter/templates/web.yaml": "services:\n  web:\n    image: flotilla-test/app:1\n",
			})
		}, false, []string{"too large", "greeter-1.0.2.tgz", "the limit is 16384"}},
		{"unreachable repository", func() { repo.srv.Close() }, true, []string{"repository unreachable", repo.url}},
	} {
		b.break_()
		stats := h.backend.Stats()
		res := h.reconcile(ctl)
		if res.Err == nil {
			t.Fatalf("%s: pass succeeded", b.name)
		}
		if got := reconcile.KindOf(res.Err) == reconcile.Transient; got != b.transient {
			t.Errorf("%s: transient %v, want %v (%v)", b.name, got, b.transient, res.Err)
		}
		for _, w := range append(b.wants, `application "`+h.app.Name+`"`, "chart greeter") {
			if !strings.Contains(res.Status.LastError, w) {
				t.Errorf("%s: error %q lacks %q", b.name, res.Status.LastError, w)
			}
		}
		if d := h.backend.Stats().Sub(stats); d.Writes != 0 {
			t.Fatalf("%s: wrote %v", b.name, d.Requests)
		}
		if !maps.Equal(running, versions(h.services())) {
			t.Fatalf("%s: running services changed", b.name)
		}
	}
}
