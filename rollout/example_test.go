package rollout_test

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/rollout"
)

// A canary of two steps, driven by hand: the caller reads the record, asks
// Decide, makes the swarm match, and records the new state.
func ExampleDecide() {
	var raw any
	_ = yaml.Unmarshal([]byte(`
strategy: canary
steps: [{weight: 10, pause: 2m}, {weight: 50, pause: 5m}]
router: {provider: traefik, rule: "Host(`+"`shop.example`"+`)", port: 8080}
`), &raw)
	spec, err := rollout.Parse(raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var st rollout.State
	for _, in := range []rollout.Input{
		{Now: start},
		{Now: start.Add(20 * time.Second), ColourReady: true},
		{Now: start.Add(time.Minute), ColourReady: true},
		{Now: start.Add(3 * time.Minute), ColourReady: true},
		{Now: start.Add(3*time.Minute + 30*time.Second), ColourReady: true},
		{Now: start.Add(9 * time.Minute), ColourReady: true},
		{Now: start.Add(10 * time.Minute), StableReady: true},
	} {
		in.Revision, in.StableRevision, in.Replicas = "v2", "v1", 4
		d := rollout.Decide(spec, st, in)
		fmt.Printf("%-8s %3d/%-3d canary replicas %d  %s\n", d.Action, d.Weights.Stable, d.Weights.Canary, d.Replicas, d.State.Phase)
		st, _ = rollout.StateFromLabels(d.State.Labels())
	}
	// Output:
	// start    100/0   canary replicas 1  Progressing
	// advance   90/10  canary replicas 1  Progressing
	// hold      90/10  canary replicas 1  Progressing
	// advance   90/10  canary replicas 2  Progressing
	// advance   50/50  canary replicas 2  Progressing
	// promote   50/50  canary replicas 2  Promoting
	// finalize 100/0   canary replicas 0  Completed
}
