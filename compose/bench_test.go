package compose

import (
	"context"
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
