package backendtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"text/template"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
)

// project is the compose project every subtest deploys, varied one field at
// a time. Its zero value is web (mounting a config and a secret) and worker
// on one overlay network, neither running a task, so a deploy costs the
// swarm no container unless a subtest asks for one.
type project struct {
	WebReplicas   int
	WebMessage    string // APP_MESSAGE of web
	WorkerMessage string // APP_MESSAGE of worker
	Config        string // content of web's config file
	NoWorker      bool   // leave worker out of the manifest
	// Modes adds a global service and a replicated job of two
	// completions, for the mode report. Both start tasks; the job's exit
	// at once, since Swarm leaves a running job task behind when its
	// service is removed.
	Modes bool
}

// declaredObjects is what the project declares besides services: one
// network, one config and one secret. A first deploy writes each once.
const declaredObjects = 3

// projectServices are the service names of the zero project, sorted.
var projectServices = []string{"web", "worker"}

// projectLabel is a label the manifest itself puts on web, as opposed to
// the ones a DeployRequest stamps.
const projectLabelKey, projectLabelValue = "backendtest.tier", "front"

const composeText = `services:
  web:
    image: {{.Image}}
    stop_grace_period: 1s
    environment:
      APP_MESSAGE: {{.WebMessage}}
    configs:
      - source: conf
        target: /app.conf
    secrets:
      - source: token
        target: token
    networks: [front]
    deploy:
      replicas: {{.WebReplicas}}
      labels:
        ` + projectLabelKey + `: ` + projectLabelValue + `
{{- if not .NoWorker}}
  worker:
    image: {{.Image}}
    stop_grace_period: 1s
    environment:
      APP_MESSAGE: {{.WorkerMessage}}
    networks: [front]
    deploy:
      replicas: 0
{{- end}}
{{- if .Modes}}
  agent:
    image: {{.Image}}
    stop_grace_period: 1s
    networks: [front]
    deploy:
      mode: global
  batch:
    image: {{.Image}}
    command: ["exit", "0"]
    stop_grace_period: 1s
    networks: [front]
    deploy:
      mode: replicated-job
      replicas: 2
{{- end}}
networks:
  front:
    driver: overlay
configs:
  conf:
    file: ./app.conf
secrets:
  token:
    file: ./token.txt
`

var composeTmpl = template.Must(template.New("compose").Parse(composeText))

// render writes p into a temporary directory and renders it for stack, as
// the reconciler would before a deploy.
func (s *suite) render(t *testing.T, stack string, p project) *compose.Rendered {
	t.Helper()
	if p.WebMessage == "" {
		p.WebMessage = "web"
	}
	if p.WorkerMessage == "" {
		p.WorkerMessage = "worker"
	}
	if p.Config == "" {
		p.Config = "setting = 1\n"
	}
	var text bytes.Buffer
	data := struct {
		project
		Image string
	}{p, s.opts.Image}
	if err := composeTmpl.Execute(&text, data); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"docker-compose.yml": text.String(),
		"app.conf":           p.Config,
		"token.txt":          "s3cret\n",
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

// request renders p for stack into a complete deploy request.
func (s *suite) request(t *testing.T, stack string, p project) charts.DeployRequest {
	t.Helper()
	r := s.render(t, stack, p)
	return charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets}
}
