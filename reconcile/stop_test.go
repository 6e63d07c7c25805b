package reconcile

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// stallingBackend holds DeployStack until released, then fails it if its
// context ended meanwhile, as a Docker call cut by cancellation would.
type stallingBackend struct {
	*chartstest.MinimalBackend
	entered chan struct{}
	release chan struct{}
}

func (b stallingBackend) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	b.entered <- struct{}{}
	<-b.release
	if err := ctx.Err(); err != nil {
		return charts.DeployResult{}, fmt.Errorf("deploy cut: %w", err)
	}
	return b.MinimalBackend.DeployStack(ctx, req)
}

func TestAStoppingControllerLetsTheWriteFinishAndEndsThePassAtTheNextStep(t *testing.T) {
	b := stallingBackend{MinimalBackend: chartstest.NewMinimal(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	f := newFakeFetcher()
	f.commit(t, repoFiles(composeV1))
	c := newTestController(t, b, f, testApp("shop", true))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan Result, 1)
	go func() {
		res, _ := c.Reconcile(ctx, "shop")
		done <- res
	}()
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the pass never reached apply")
	}
	stop()
	close(b.release)
	res := <-done
	if res.Err == nil || !strings.Contains(res.Err.Error(), "controller stopping before correct") {
		t.Fatalf("pass error %v, want it to stop at the step after apply", res.Err)
	}
	if res.Deployed == nil || len(res.Deployed.Created) != 2 {
		t.Fatalf("the deploy in flight did not finish: %+v", res.Deployed)
	}
	rs, _ := b.Releases(context.Background(), "shop")
	if len(rs) != 1 || rs[0].Revision != 1 {
		t.Fatalf("release records %+v, want revision 1 recorded by the finished apply", rs)
	}
}

func TestAPassOfAStoppedControllerStartsNoStep(t *testing.T) {
	b, _, c := shopOnMinimal(t, true)
	ctx, stop := context.WithCancel(context.Background())
	stop()
	res, _ := c.Reconcile(ctx, "shop")
	if res.Err == nil || !strings.Contains(res.Err.Error(), "controller stopping before fetch") {
		t.Fatalf("pass error %v, want a stop before fetch", res.Err)
	}
	if b.Writes() != 0 {
		t.Fatalf("a stopped controller wrote %d times", b.Writes())
	}
}

func TestRunStartsNoPassOnceItsContextEnded(t *testing.T) {
	_, _, c := shopOnMinimal(t, true)
	ctx, stop := context.WithCancel(context.Background())
	stop()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Status("shop"); !st.LastPass.IsZero() {
		t.Fatalf("a pass ran after the stop: %+v", st)
	}
}
