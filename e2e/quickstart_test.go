package e2e

import (
	"io/fs"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

// The README's first command deploys examples/quickstart: its applications
// file must parse and grant what its stack asks of the node. The guard's
// host-port rule once refused it, and the file could not grant the port
// (allow.hostPorts did not decode); nothing but running the script showed
// it. Here the example's own file and repository go through a real pass.
func TestTheQuickstartExampleIsAcceptedAsShipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	raw, err := os.ReadFile("../examples/quickstart/applications.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := application.Parse("applications.yaml", []byte(strings.ReplaceAll(string(raw), "REPO_URL", h.repo.Dir)))
	if err != nil {
		t.Fatalf("the example's applications file: %v", err)
	}
	ex := f.Applications[0]
	// The example's own settings, on this test's stack and repository.
	h.app.Allow, h.app.Source.Compose = ex.Allow, ex.Source.Compose
	files := map[string]string{}
	repo := os.DirFS("../examples/quickstart/repo")
	err = fs.WalkDir(repo, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(repo, p)
		files[path.Join("deploy", p)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	h.repo.Commit("quickstart", files)
	// Its tasks may not start here (the quickstart itself may hold port
	// 18080 on this node); what is checked is that the pass is accepted.
	if res := h.reconcile(h.controller(false)); res.Err != nil || res.Deployed == nil || len(res.Deployed.Created) == 0 {
		t.Fatalf("the quickstart example as shipped: err %v, deployed %+v", res.Err, res.Deployed)
	}
}
