package backend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

func TestDeployStack_writesSealedValuesAndHashesOnlyTheirPlaceholders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "sealed")
	swarmtest.Cleanup(t, stack)

	id := sopsagetest.NewIdentity(t)
	ids, err := sopsage.ParseIdentities(id.File)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"docker-compose.yml": "version: \"3.8\"\nservices:\n  web:\n    image: flotilla-test/app:1\n    env_file: ./web.env\n    deploy: {replicas: 0}\n",
		"web.env":            string(sopsagetest.Encrypt(t, "web.env", []byte("API_TOKEN=backend-sealed-61ae\n"), id.Recipient)),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := compose.Render(stack, compose.Dir{Root: dir, Decrypt: ids.Decrypt, SealKey: ids.SealKey()})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sealed) != 1 {
		t.Fatalf("sealed %d values, want 1", len(r.Sealed))
	}
	labels := map[string]string{"io.flotilla.owner": "ctl/app"}

	// Without its sealed values the manifest is refused before any write.
	if _, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Labels: labels}); !errors.Is(err, compose.ErrSealedMissing) {
		t.Fatalf("deploy without sealed values: %v, want ErrSealedMissing", err)
	}
	if live := services(t, b, stack); len(live) != 0 {
		t.Fatalf("a refused deploy created %d services", len(live))
	}

	if _, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Sealed: r.Sealed, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	web := services(t, b, stack)["web"]
	if env := web.Spec.TaskTemplate.ContainerSpec.Env; !slices.Contains(env, "API_TOKEN=backend-sealed-61ae") {
		t.Fatalf("live env %q lacks the sealed value", env)
	}
	hash := web.Spec.Labels[LabelSpecHash]

	// The hash is taken over the placeholder, not the plaintext: the same
	// manifest with another plaintext hashes the same (and so a label
	// anyone can read is no test of a guessed value).
	for ph := range r.Sealed {
		res, err := b.DeployStack(ctx, charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Sealed: map[string]string{ph: "a-guess"}, Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		if res.Writes != 0 {
			t.Errorf("the plaintext alone changed the spec hash: %d writes", res.Writes)
		}
	}
	if got := services(t, b, stack)["web"].Spec.Labels[LabelSpecHash]; got != hash {
		t.Errorf("spec hash moved from %s to %s", hash, got)
	}
}
