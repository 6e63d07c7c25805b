package backend

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"text/template"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestMain(m *testing.M) { os.Exit(swarmtest.Main(m)) }

// newBackend returns a backend on the shared swarm whose logs go to the
// test's output only when -v is given.
func newBackend(t *testing.T) *Backend {
	t.Helper()
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	b, err := New(context.Background(), Options{
		Host:   swarmtest.Client(t).DaemonHost(),
		Logger: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// fixture is a compose project a test renders. Zero values give the
// three-service stack most tests deploy.
type fixture struct {
	Message     string // APP_MESSAGE of worker
	Config      string // content of web's config file
	Secret      string // content of web's secret file
	Replicas    int
	ExternalNet string // when set, web also attaches to this external network
	WebImage    string
}

const composeTemplate = `version: "3.8"
services:
  web:
    image: {{.WebImage}}
    stop_grace_period: 1s
    environment:
      APP_MESSAGE: web
    configs:
      - source: appconf
        target: /app.conf
    secrets:
      - source: token
        target: token
{{- if .ExternalNet}}
    networks: [front, outside]
{{- else}}
    networks: [front]
{{- end}}
    deploy:
      replicas: {{.Replicas}}
      labels:
        tier: front
  worker:
    image: {{.Image}}
    stop_grace_period: 1s
    networks: [front]
    environment:
      APP_MESSAGE: {{.Message}}
    deploy:
      replicas: {{.Replicas}}
  cache:
    image: {{.Image}}
    stop_grace_period: 1s
    networks: [front]
    deploy:
      replicas: {{.Replicas}}
networks:
  front:
    driver: overlay
{{- if .ExternalNet}}
  outside:
    external: true
    name: {{.ExternalNet}}
{{- end}}
configs:
  appconf:
    file: ./app.conf
secrets:
  token:
    file: ./token.txt
`

var composeTmpl = template.Must(template.New("compose").Parse(composeTemplate))

// render writes p as a compose project in a temporary directory and
// renders it for stack.
func render(t *testing.T, stack string, p fixture) *compose.Rendered {
	t.Helper()
	if p.Message == "" {
		p.Message = "hello"
	}
	if p.Config == "" {
		p.Config = "setting = 1\n"
	}
	if p.Secret == "" {
		p.Secret = "s3cret\n"
	}
	if p.WebImage == "" {
		p.WebImage = swarmtest.Image
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	data := struct {
		fixture
		Image string
	}{p, swarmtest.Image}
	if err := composeTmpl.Execute(&buf, data); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"docker-compose.yml": buf.String(),
		"app.conf":           p.Config,
		"token.txt":          p.Secret,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := compose.Render(stack, compose.Dir{Root: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

// deploy renders p for stack and deploys it, failing the test on error.
func deploy(t *testing.T, b *Backend, stack string, p fixture, labels map[string]string) charts.DeployResult {
	t.Helper()
	r := render(t, stack, p)
	res, err := b.DeployStack(context.Background(), charts.DeployRequest{
		Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets, Labels: labels,
	})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	return res
}

// waitRunning waits until every service of stack runs as many tasks as it
// wants, and at least one service exists.
func waitRunning(t *testing.T, b *Backend, stack string) []charts.ServiceState {
	t.Helper()
	var states []charts.ServiceState
	swarmtest.Eventually(t, 45*time.Second, func() (bool, string) {
		var err error
		states, err = b.ReadStackServices(context.Background(), stack)
		if err != nil {
			return false, err.Error()
		}
		return swarmtest.Settled(states)
	})
	return states
}

// services returns the stack's live services by unscoped name.
func services(t *testing.T, b *Backend, stack string) map[string]swarm.Service {
	t.Helper()
	live, err := b.LiveServices(context.Background(), stack)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]swarm.Service, len(live))
	for name, s := range live {
		out[unscoped(stack, name)] = s
	}
	return out
}

// updateBehindBack changes a service the way another writer would. The
// swarm bumps a new service's version on its own (network allocation), so a
// write refused as out of date is retried from a fresh read.
func updateBehindBack(t *testing.T, id string, change func(*swarm.ServiceSpec)) {
	t.Helper()
	api := swarmtest.Client(t)
	ctx := context.Background()
	for range 10 {
		s, err := api.ServiceInspect(ctx, id, client.ServiceInspectOptions{})
		if err != nil {
			t.Fatalf("inspect service %s: %v", id, err)
		}
		change(&s.Service.Spec)
		_, err = api.ServiceUpdate(ctx, id, client.ServiceUpdateOptions{Version: s.Service.Version, Spec: s.Service.Spec})
		if err == nil {
			return
		}
		if !isOutOfSequence(err) {
			t.Fatalf("update service %s: %v", id, err)
		}
	}
	t.Fatalf("update service %s: still out of sequence after 10 tries", id)
}
