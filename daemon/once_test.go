package daemon

import (
	"bytes"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// The orphan line counts what the sweep found on the swarm, by kind, and a
// stack whose objects are all gone says so instead of "would remove 0".
func TestPrintOrphanCountsWhatIsLeft(t *testing.T) {
	for _, tt := range []struct {
		sweep application.SweepStatus
		want  string
	}{
		{application.SweepStatus{DryRun: true, Pending: []string{"service s_web", "service s_api", "config s_c-0123456789"}},
			"stack s (of removed ctl/shop): kept; --prune would remove 3 resource(s): 2 service, 1 config\n"},
		{application.SweepStatus{DryRun: true},
			"stack s (of removed ctl/shop): nothing left on the swarm that --prune would remove\n"},
		{application.SweepStatus{Removed: []string{"network s_default"}},
			"stack s (of removed ctl/shop): removed 1 resource(s): 1 network\n"},
	} {
		var b bytes.Buffer
		sw := tt.sweep
		printOrphan(&b, reconcile.Orphan{Stack: "s", Owner: "ctl/shop", Sweep: &sw})
		if b.String() != tt.want {
			t.Errorf("got  %q\nwant %q", b.String(), tt.want)
		}
	}
}
