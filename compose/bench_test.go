package compose

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func BenchmarkRender(b *testing.B) {
	root := b.TempDir()
	d := Dir{Root: root, Path: "stack", Files: []string{"compose.yaml", "compose.prod.yaml"}, EnvFiles: []string{"app.env"}}
	if err := copyFixture(root); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Render("demo", d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConvert(b *testing.B) {
	root := b.TempDir()
	if err := copyFixture(root); err != nil {
		b.Fatal(err)
	}
	r, err := Render("demo", Dir{Root: root, Path: "stack", Files: []string{"compose.yaml", "compose.prod.yaml"}, EnvFiles: []string{"app.env"}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Convert(context.Background(), r.Manifest, "demo", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirstRender20 is a first render and conversion of a 20-service
// project, as a controller's first pass of a new application (or a
// --once run) makes it: every iteration renders under a new stack name and
// forgets the manifests validated before, so no memo of an earlier render,
// conversion or validation applies.
func BenchmarkFirstRender20(b *testing.B) {
	d := Dir{Root: b.TempDir()}
	var text strings.Builder
	text.WriteString("version: \"3.8\"\nservices:\n")
	for i := range 20 {
		fmt.Fprintf(&text, "  svc%02d:\n    image: example/app:1\n    environment: {INDEX: \"%d\"}\n    networks: [back]\n    deploy: {replicas: 0}\n", i, i)
	}
	text.WriteString("networks:\n  back: {driver: overlay}\n")
	if err := os.WriteFile(filepath.Join(d.Root, "docker-compose.yml"), []byte(text.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		stack := fmt.Sprintf("first%d", i)
		memo.validated.reset()
		r, err := render(stack, d, renderOpts{inc: incOff})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Convert(context.Background(), r.Manifest, stack, nil); err != nil {
			b.Fatal(err)
		}
	}
}
