package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// One field of each family `docker service update` can change, changed by
// hand on the worker: the controller must report exactly that field and,
// with selfHeal, put it back on the next pass without touching the other
// services.
//
// The worker runs no replicas here, so each hand-made change and each
// correction settles at once; what is compared is the spec, not the tasks.
func TestSelfHealCorrectsEachFieldFamilyAndNothingElse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	h.app.SyncPolicy.Automated.SelfHeal = true
	idle := strings.Replace(stackFile, "      QUEUE: jobs\n", "      QUEUE: jobs\n    deploy: {replicas: 0}\n", 1)
	h.repo.Commit("initial", files(idle))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(3)

	one := uint64(1)
	families := []struct {
		field string
		edit  func(*swarm.ServiceSpec)
	}{
		{"image", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Image = swarmtest.Image2 }},
		{"args", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Args = []string{"serve", ":9000"} }},
		{"labels.team", func(s *swarm.ServiceSpec) { s.Labels["team"] = "someone-else" }},
		{"containerLabels.tier", func(s *swarm.ServiceSpec) {
			if s.TaskTemplate.ContainerSpec.Labels == nil {
				s.TaskTemplate.ContainerSpec.Labels = map[string]string{}
			}
			s.TaskTemplate.ContainerSpec.Labels["tier"] = "x"
		}},
		{"replicas", func(s *swarm.ServiceSpec) { two := uint64(2); s.Mode.Replicated.Replicas = &two }},
		{"env.EXTRA", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Env = append(s.TaskTemplate.ContainerSpec.Env, "EXTRA=1")
		}},
		{"resources.limits.memory", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Resources = &swarm.ResourceRequirements{Limits: &swarm.Limit{MemoryBytes: 64 << 20}}
		}},
		{"placement.constraints", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Placement = &swarm.Placement{Constraints: []string{"node.role==manager"}}
		}},
		{"user", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.User = "65534" }},
		{"hosts", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Hosts = []string{"10.0.0.1 db.internal"} }},
		{"restartPolicy.maxAttempts", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.RestartPolicy = &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionAny, MaxAttempts: &one}
		}},
	}
	for _, fam := range families {
		changeService(t, h, "worker", fam.edit)
		// Drift is judged on settled services: the hand-made update may
		// still be rolling out, so passes repeat as the interval would,
		// until one finds the drift and heals it.
		var res reconcile.Result
		swarmtest.Eventually(t, 45*time.Second, func() (bool, string) {
			res = h.reconcile(ctl)
			return res.Err != nil || res.Healed != nil, fmt.Sprint(driftFields(res.Status))
		})
		if res.Err != nil {
			t.Fatalf("%s: %v", fam.field, res.Err)
		}
		var corrected []string
		for _, d := range res.Status.Corrected {
			corrected = append(corrected, d.Service+":"+d.Field)
		}
		if !slices.Equal(corrected, []string{"worker:" + fam.field}) {
			t.Fatalf("%s: corrected %v, want exactly worker:%s", fam.field, corrected, fam.field)
		}
		if !slices.Equal(res.Healed.Updated, []string{"worker"}) || len(res.Healed.Created) != 0 {
			t.Fatalf("%s: heal wrote %+v, want the worker only", fam.field, res.Healed)
		}
		s, err := swarmtest.Client(t).ServiceInspect(context.Background(), h.app.Stack+"_worker", client.ServiceInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fam.field == "image" && s.Service.Spec.TaskTemplate.ContainerSpec.Image != swarmtest.Image {
			t.Fatalf("image not healed: %s", s.Service.Spec.TaskTemplate.ContainerSpec.Image)
		}
		h.waitRunning(3)
		before := versions(h.services())
		res = h.reconcile(ctl)
		if res.Err != nil || len(res.Status.Drift) != 0 {
			t.Fatalf("%s: after heal: %v %v", fam.field, res.Err, driftFields(res.Status))
		}
		if !maps.Equal(before, versions(h.services())) {
			t.Fatalf("%s: a settled, healed stack was written again", fam.field)
		}
	}
}

// Without selfHeal each family is reported as exactly its field.
func TestDriftReportsExactlyTheChangedField(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	idle := strings.Replace(stackFile, "    stop_grace_period: 1s\nnetworks:", "    stop_grace_period: 1s\n    deploy: {replicas: 0}\nnetworks:", 1)
	h.repo.Commit("initial", files(idle))
	ctl := h.controller(false)
	if res := h.reconcile(ctl); res.Err != nil {
		t.Fatal(res.Err)
	}
	h.waitRunning(3)
	cases := []struct {
		field string
		edit  func(*swarm.ServiceSpec)
	}{
		{"env.EXTRA", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Env = append(s.TaskTemplate.ContainerSpec.Env, "EXTRA=1")
		}},
		{"stopGracePeriod", func(s *swarm.ServiceSpec) { d := 7 * time.Second; s.TaskTemplate.ContainerSpec.StopGracePeriod = &d }},
		{"workdir", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Dir = "/tmp" }},
	}
	want := []string{}
	for _, c := range cases {
		changeService(t, h, "cron", c.edit)
		want = append(want, "cron:"+c.field)
		slices.Sort(want)
		var got []string
		swarmtest.Eventually(t, 45*time.Second, func() (bool, string) {
			got = driftFields(h.reconcile(ctl).Status)
			return slices.Equal(got, want), fmt.Sprint(got)
		})
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("drift %v, want %v", got, want)
		}
	}
}
