package reconcile

import (
	"context"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// refusingBackend is MinimalBackend whose deploys the daemon refuses as an
// invalid argument, wrapped the way the moby backend wraps its errors.
type refusingBackend struct{ *chartstest.MinimalBackend }

func (refusingBackend) DeployStack(_ context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	return charts.DeployResult{}, fmt.Errorf("deploy stack %s: create service x: %w", req.Stack,
		cerrdefs.ErrInvalidArgument.WithMessage("name must be 63 characters or fewer"))
}

// A request the daemon refuses as invalid would be refused again: it is bad
// input that waits for the next commit, not a transient failure retried on
// every interval.
func TestDaemonInvalidArgumentStallsTheApplication(t *testing.T) {
	b := refusingBackend{chartstest.NewMinimal()}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	res := mustReconcile(t, c, "shop")
	if res.Err == nil {
		t.Fatal("refused deploy reported no error")
	}
	if k := KindOf(res.Err); k != Stalled {
		t.Fatalf("kind %s, want %s: %v", k, Stalled, res.Err)
	}
}
