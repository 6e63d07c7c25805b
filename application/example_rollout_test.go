package application_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

// examples/rollout's applications file, with REPO_URL replaced as
// docs/rollouts.md "Try it" does, is valid and lets the stack onto the
// router's network, and onto nothing else.
func TestTheRolloutExampleApplicationsFile(t *testing.T) {
	raw, err := os.ReadFile("../examples/rollout/applications.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("repoURL: REPO_URL")) {
		t.Fatal("the walkthrough replaces REPO_URL, and the file has none")
	}
	text := bytes.ReplaceAll(raw, []byte("REPO_URL"), []byte("git://172.18.0.1/rollout"))
	f, err := application.Parse("applications.yaml", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Applications) != 1 {
		t.Fatalf("applications %+v", f.Applications)
	}
	if a := f.Applications[0].Allow; len(a.Networks) != 1 || a.Networks[0] != "edge" || len(a.HostPorts) != 0 {
		t.Errorf("allow %+v, want the network edge only", a)
	}
}
