package application_test

import (
	"os"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

// examples/rollout's applications file is valid and lets the stack onto
// the router's network, and onto nothing else.
func TestTheRolloutExampleApplicationsFile(t *testing.T) {
	text, err := os.ReadFile("../examples/rollout/applications.yaml")
	if err != nil {
		t.Fatal(err)
	}
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
