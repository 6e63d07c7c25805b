package chartengine

import (
	"errors"
	"testing"

	"github.com/flotilla-gitops/flotilla/source"
)

func TestValueFilesOfASecondRootGoAfterValueFilesAndUnderInlineValues(t *testing.T) {
	root := copyExample(t, map[string]string{"chart/a.yaml": "web: {message: from-a, replicas: 3}\nworker: {queue: qa}\n"})
	other := t.TempDir()
	if err := writeFile(other+"/shop/prod.yaml", "web: {message: from-values-repo}\nworker: {queue: qv}\n"); err != nil {
		t.Fatal(err)
	}
	r := mustRender(t, root, Dir{
		ValueFiles:      []string{"a.yaml"},
		ExtraValueFiles: []ValueFile{{Root: other, File: "shop/prod.yaml", Origin: "values.git"}},
		Values:          map[string]any{"worker": map[string]any{"queue": "qi"}},
	})
	svcs := services(t, r.Manifest)
	if got := svcs["web"]; got != "flotilla-test/app:1 APP_MESSAGE=from-values-repo x3" {
		t.Errorf("web: %s", got)
	}
	if got := svcs["worker"]; got != "flotilla-test/app:1 QUEUE=qi x1" {
		t.Errorf("worker: %s", got)
	}
}

func TestMissingValueFileOfASecondRootNamesItsOriginAndFile(t *testing.T) {
	root := copyExample(t, nil)
	err := mustFail(render(t, root, Dir{ExtraValueFiles: []ValueFile{{Root: t.TempDir(), File: "shop/prod.yaml", Origin: "https://git.example.com/ops/values.git"}}}))
	wantFault(t, err, "https://git.example.com/ops/values.git: shop/prod.yaml", "shop/prod.yaml")
}

func TestValueFileLeavingTheSecondRootIsRefused(t *testing.T) {
	root := copyExample(t, nil)
	err := mustFail(render(t, root, Dir{ExtraValueFiles: []ValueFile{{Root: t.TempDir(), File: "../chart/values.yaml", Origin: "values.git"}}}))
	if !errors.Is(err, source.ErrOutsideRepository) {
		t.Fatalf("got %v", err)
	}
}
