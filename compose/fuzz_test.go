package compose

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flotilla-gitops/flotilla/fault"
)

// FuzzRender feeds arbitrary bytes to Render as the only compose file of a
// project. Whatever the input, Render must return a manifest that passes
// the compose schema and that Convert accepts, or a *fault.Error, and never
// panic.
func FuzzRender(f *testing.F) {
	for _, name := range []string{"compose.yaml", "compose.prod.yaml"} {
		if b, err := os.ReadFile(filepath.Join("testdata/stack", name)); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"",
		"services: {}\n",
		"services:\n  web:\n    image: nginx\n",
		"services:\n  web:\n    image: nginx\n    ulimits:\n      nofile: {soft: x, hard: 1}\n",
		"services:\n  web:\n    image: nginx\n    deploy:\n      resources:\n        limits: {memory: [1]}\n",
		"services:\n  1: {image: x}\n",
		"services:\n  web:\n    image: nginx\n    environment: [1, 2]\n    env_file: [3]\n",
		"services:\n  web:\n    image: ${X:?missing}\n",
		"services:\n  web:\n    image: nginx\n    volumes: ['./a:/a', '~/b:/b', '/c:/c']\n",
		"configs:\n  c:\n    file: ../../../etc/passwd\nservices:\n  w:\n    image: x\n    configs: [c]\n",
		"version: '3.0'\nservices:\n  web:\n    image: nginx\n    extra_hosts: {a: 1.2.3.4}\n",
		"services:\n  a: &a {image: x}\n  b: *a\n",
		"services:\n  web:\n    image: nginx\n    healthcheck: {test: 1}\n",
		"version: '3.5'\nservices:\n  web:\n    image: nginx\n    x-flotilla: {wave: 2}\n",
		"services:\n  m:\n    image: x\n    deploy: {mode: replicated-job}\n    x-flotilla: {hook: PreSync, deletePolicy: HookFailed}\n",
		"services:\n  web:\n    image: nginx\n    x-flotilla: {wave: [1], hook: 3}\n",
		"services:\n  web:\n    image: nginx\n    x-flotilla:\n      rollout: {strategy: canary, steps: [{weight: 10, pause: 2m}, {weight: 60}], analysis: {prometheus: {address: 'http://p:9090', query: 'up', max: 0.5}}}\n",
		"services:\n  web:\n    image: nginx\n    x-flotilla: {rollout: {strategy: blueGreen, rollbackWindow: 1m, router: {provider: traefik, rule: 'Host(`a`)', port: 80}}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "compose.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Render("fuzz", Dir{Root: root})
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error is %T, not *fault.Error: %v", err, err)
			}
			return
		}
		if err := schemaErr(t, r.Manifest); err != nil {
			t.Fatalf("a rendered manifest fails the compose schema its conversion skips: %v\n%s", err, r.Manifest)
		}
		if _, err := ReadOrdering(r.Manifest); err != nil {
			t.Fatalf("a rendered manifest's x-flotilla does not read back: %v", err)
		}
		if _, err := Convert(context.Background(), r.Manifest, "fuzz", nil); err != nil {
			// A render that the loader accepted but convert refuses (an
			// undefined network, say) is fine; a manifest that no longer
			// loads is not.
			if _, _, derr := decodeManifest(r.Manifest); derr != nil {
				t.Fatalf("manifest does not load back: %v\n%s", derr, r.Manifest)
			}
		}
	})
}
