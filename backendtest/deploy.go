package backendtest

import (
	"context"
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/charts"
)

// A first deploy creates every service and every declared object, and says
// so service by service.
func (s *suite) testDeployCreates(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	res := deploy(t, b, s.request(t, stack, project{}))
	checkResult(t, "first deploy", res, want{created: projectServices, writes: len(projectServices) + declaredObjects})
	if got := names(b.StackServices(context.Background(), stack)); !slices.Equal(got, projectServices) {
		t.Fatalf("services after deploy: %v, want %v", got, projectServices)
	}
}

// A steady-state pass must cost the swarm nothing: the same manifest again
// writes no object and reports every service unchanged.
func (s *suite) testRedeployWritesNothing(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	req := s.request(t, stack, project{})
	deploy(t, b, req)
	checkResult(t, "same manifest again", deploy(t, b, req), want{unchanged: projectServices})
	// A fresh render of the same project is the same manifest too.
	checkResult(t, "same project rendered again", deploy(t, b, s.request(t, stack, project{})), want{unchanged: projectServices})
}

// Changing one service's spec rewrites that service and nothing else.
func (s *suite) testChangeUpdatesOnlyThatService(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	deploy(t, b, s.request(t, stack, project{}))
	res := deploy(t, b, s.request(t, stack, project{WorkerMessage: "changed"}))
	checkResult(t, "worker changed", res, want{updated: []string{"worker"}, unchanged: []string{"web"}, writes: 1})
	// The change is now the deployed spec, not a difference that stays.
	res = deploy(t, b, s.request(t, stack, project{WorkerMessage: "changed"}))
	checkResult(t, "changed manifest again", res, want{unchanged: projectServices})
}

// Writes counts configs as well as services: new config content is a new
// config object plus an update of the one service that mounts it.
func (s *suite) testWritesCountConfigs(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	deploy(t, b, s.request(t, stack, project{}))
	res := deploy(t, b, s.request(t, stack, project{Config: "setting = 2\n"}))
	checkResult(t, "config changed", res, want{updated: []string{"web"}, unchanged: []string{"worker"}, writes: 2})
}

// Heal rewrites a named service whose manifest spec did not change, and only
// that one.
func (s *suite) testHealRewrites(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	req := s.request(t, stack, project{})
	deploy(t, b, req)
	req.Heal = []string{scoped(stack, "worker")}
	checkResult(t, "heal worker", deploy(t, b, req), want{updated: []string{"worker"}, unchanged: []string{"web"}, writes: 1})
	req.Heal = nil
	checkResult(t, "after heal", deploy(t, b, req), want{unchanged: projectServices})
}

// Request labels land on every service a deploy creates or updates, next to
// the labels the manifest itself declares.
func (s *suite) testLabelsOnServices(t *testing.T, b charts.Backend) {
	const key = "backendtest.revision"
	stack := s.stack(t)
	req := s.request(t, stack, project{})
	req.Labels = map[string]string{key: "1", "backendtest.owner": "ctl/app"}
	deploy(t, b, req)
	got := byName(t, b.StackServices(context.Background(), stack))
	for _, name := range projectServices {
		l := got[name].Labels
		if l[key] != "1" || l["backendtest.owner"] != "ctl/app" {
			t.Fatalf("%s labels after create: %v, want the request's labels", name, l)
		}
	}
	if v := got["web"].Labels[projectLabelKey]; v != projectLabelValue {
		t.Fatalf("web label %s = %q, want %q from the manifest", projectLabelKey, v, projectLabelValue)
	}

	req = s.request(t, stack, project{WorkerMessage: "changed"})
	req.Labels = map[string]string{key: "2", "backendtest.owner": "ctl/app"}
	deploy(t, b, req)
	if l := byName(t, b.StackServices(context.Background(), stack))["worker"].Labels; l[key] != "2" {
		t.Fatalf("worker labels after update: %v, want %s=2", l, key)
	}
}

// A service the manifest no longer declares stays: removal is a separate,
// deliberate step (a sweep), never a side effect of a deploy.
func (s *suite) testNeverRemoves(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	deploy(t, b, s.request(t, stack, project{}))
	res := deploy(t, b, s.request(t, stack, project{NoWorker: true}))
	checkResult(t, "worker dropped from manifest", res, want{unchanged: []string{"web"}})
	if got := names(b.StackServices(context.Background(), stack)); !slices.Equal(got, projectServices) {
		t.Fatalf("services after worker was dropped: %v, want %v", got, projectServices)
	}
}

// A request that fails validation writes nothing. The contract shows
// networks and configs only through Writes, so a following valid deploy
// must still have to create every one of them.
func (s *suite) testInvalidRequestWritesNothing(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	ctx := context.Background()
	good := s.request(t, stack, project{})

	bad := good
	bad.Secrets = nil // the secret is on no swarm and its plaintext is missing
	if res, err := b.DeployStack(ctx, bad); err == nil {
		t.Fatalf("deploy without secret plaintext succeeded: %+v", res)
	} else if res.Writes != 0 {
		t.Fatalf("refused deploy reports %d writes", res.Writes)
	}
	bad = good
	bad.Manifest = "services: [this is not a manifest"
	if res, err := b.DeployStack(ctx, bad); err == nil {
		t.Fatalf("deploy of a broken manifest succeeded: %+v", res)
	}
	if got := b.StackServices(ctx, stack); len(got) != 0 {
		t.Fatalf("services after refused deploys: %s", describe(got))
	}
	checkResult(t, "valid deploy after refused ones", deploy(t, b, good),
		want{created: projectServices, writes: len(projectServices) + declaredObjects})
}
