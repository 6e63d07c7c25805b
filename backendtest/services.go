package backendtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/charts"
)

// StackServices names each service without its stack prefix, with the mode
// and desired count the manifest asked for, and its running count catches
// up with the desired one.
func (s *suite) testStackServicesReport(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	deploy(t, b, s.request(t, stack, project{WebReplicas: 1}))
	wantDesired := map[string]uint64{"web": 1, "worker": 0}
	s.eventually(t, func() (bool, string) {
		states := b.StackServices(context.Background(), stack)
		got := byName(t, states)
		if len(got) != len(wantDesired) {
			return false, "services " + describe(states)
		}
		for name, desired := range wantDesired {
			st, ok := got[name]
			if !ok {
				return false, fmt.Sprintf("no service %q in %s", name, describe(states))
			}
			if st.Mode != "replicated" || st.Desired != desired {
				t.Fatalf("%s: mode %q desired %d, want replicated %d", name, st.Mode, st.Desired, desired)
			}
			if !strings.HasPrefix(st.Image, s.opts.Image) {
				t.Fatalf("%s: image %q, want %s", name, st.Image, s.opts.Image)
			}
			if st.ID == "" {
				t.Fatalf("%s: no id", name)
			}
			if st.Running != desired {
				return false, "running " + describe(states)
			}
		}
		return true, ""
	})
}

// Every mode is reported by its contract name: a global service wants one
// task per eligible node (at least one here), a replicated job as many
// completions as the manifest asked for, and its completions catch up.
func (s *suite) testStackServicesModes(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	deploy(t, b, s.request(t, stack, project{Modes: true}))
	// A global service's desired count is the daemon's count of its tasks,
	// which its orchestrator makes a moment after the create.
	s.eventually(t, func() (bool, string) {
		st := byName(t, b.StackServices(context.Background(), stack))["agent"]
		return st.Mode == "global" && st.Desired >= 1,
			fmt.Sprintf("global service reported as %q desired %d, want global, at least 1", st.Mode, st.Desired)
	})
	got := byName(t, b.StackServices(context.Background(), stack))
	if st := got["batch"]; st.Mode != "replicated-job" || st.Desired != 2 {
		t.Fatalf("replicated job reported as %q desired %d, want replicated-job 2", st.Mode, st.Desired)
	}
	if st := got["web"]; st.Mode != "replicated" {
		t.Errorf("replicated service reported as %q", st.Mode)
	}
	s.eventually(t, func() (bool, string) {
		st := byName(t, b.StackServices(context.Background(), stack))["batch"]
		return st.Completed == st.Desired && st.Running == 0,
			fmt.Sprintf("job %d/%d completed, %d running", st.Completed, st.Desired, st.Running)
	})
}

// A stack nothing was deployed to has no services: no error, nothing made up.
func (s *suite) testStackServicesUnknownStack(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	if got := b.StackServices(context.Background(), stack); len(got) != 0 {
		t.Fatalf("unknown stack reports %s", describe(got))
	}
}

// RemoveStack takes the stack's services, networks, configs and secrets and
// leaves its release records, so history outlives the stack and a deploy
// afterwards starts from scratch.
func (s *suite) testRemoveStackKeepsReleases(t *testing.T, b charts.Backend) {
	stack := s.stack(t)
	ctx := context.Background()
	req := s.request(t, stack, project{})
	deploy(t, b, req)
	record(t, b, charts.Release{Name: stack, Revision: 1, Owner: "ctl/app", Manifest: req.Manifest}, 0)

	if err := b.RemoveStack(ctx, stack); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if got := b.StackServices(ctx, stack); len(got) != 0 {
		t.Fatalf("services after remove: %s", describe(got))
	}
	if rs := releases(t, b, stack); len(rs) != 1 || rs[0].Revision != 1 {
		t.Fatalf("records after remove: revisions %v, want [1]", revisions(rs))
	}
	checkResult(t, "deploy after remove", deploy(t, b, req),
		want{created: projectServices, writes: len(projectServices) + declaredObjects})
}
