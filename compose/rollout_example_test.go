package compose

import (
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/rollout"
)

// The worked example in examples/rollout, which docs/rollouts.md walks
// through, must render with the rollout it describes.
func TestTheRolloutExampleRendersWithItsCanary(t *testing.T) {
	r, err := Render("shop", Dir{Root: "../examples/rollout/repo/shop", Files: []string{"compose.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	ord, err := ReadOrdering(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	spec := ord.Of("web").Rollout
	if spec == nil {
		t.Fatal("the example's web service has no rollout")
	}
	if spec.Strategy != rollout.Canary || len(spec.Steps) != 2 || spec.Router.Provider != rollout.Traefik ||
		spec.Analysis == nil || spec.Analysis.Traefik == nil || spec.ScaleDownDelay != rollout.DefaultScaleDownDelay ||
		spec.Analysis.Interval != 30*time.Second {
		t.Errorf("the example's rollout %+v", spec)
	}
}
