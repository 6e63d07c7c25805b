package backend

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
)

func TestOperation(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/v1.41/services", "service.list"},
		{"GET", "/v1.41/services/abc", "service.inspect"},
		{"POST", "/v1.41/services/create", "service.create"},
		{"POST", "/v1.41/services/abc/update", "service.update"},
		{"DELETE", "/v1.41/services/abc", "service.remove"},
		{"GET", "/v1.41/tasks", "task.list"},
		{"GET", "/v1.41/nodes", "node.list"},
		{"POST", "/v1.41/configs/create", "config.create"},
		{"POST", "/v1.41/secrets/create", "secret.create"},
		{"POST", "/v1.41/networks/create", "network.create"},
		{"GET", "/_ping", "ping"},
		{"HEAD", "/_ping", "ping"},
		{"GET", "/v1.41/info", "info"},
		{"GET", "/v1.41/distribution/nginx:1/json", "distribution.inspect"},
	} {
		if got := operation(tc.method, tc.path); got != tc.want {
			t.Errorf("operation(%s %s) = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestRecordName(t *testing.T) {
	if got := recordName("shop", 7); got != "flotilla-release.shop.7" {
		t.Errorf("recordName = %q", got)
	}
	long := strings.Repeat("a", 80)
	a, b := recordName(long, 12), recordName(long+"b", 12)
	if len(a) > maxObjectName || !objectNameRE.MatchString(a) || a == b {
		t.Errorf("long names %q, %q: want distinct valid names within %d", a, b, maxObjectName)
	}
	if !strings.HasSuffix(a, ".12") {
		t.Errorf("long name %q lost its revision", a)
	}
	if got := recordName("has space", 1); !objectNameRE.MatchString(got) {
		t.Errorf("recordName with a space = %q", got)
	}
}

func TestSpecHash(t *testing.T) {
	replicas := uint64(1)
	spec := func() swarm.ServiceSpec {
		return swarm.ServiceSpec{
			Annotations: swarm.Annotations{Name: "s_web", Labels: map[string]string{"b": "2", "a": "1", "c": "3"}},
			Mode:        swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
			TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{
				Image: "img:1", Env: []string{"A=1"},
			}},
		}
	}
	h1, _ := specHash(spec())
	h2, _ := specHash(spec())
	if h1 != h2 {
		t.Fatal("equal specs hash differently")
	}
	changed := spec()
	changed.TaskTemplate.ContainerSpec.Env = []string{"A=2"}
	if h3, _ := specHash(changed); h3 == h1 {
		t.Error("an env change does not change the hash")
	}
}

func TestWithLabels_leavesDesiredAndTaskTemplateAlone(t *testing.T) {
	desired := swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Labels: map[string]string{"tier": "front"}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Labels: map[string]string{"c": "1"}}},
	}
	got := withLabels(desired, map[string]string{"io.flotilla.revision": "3"}, "h")
	if got.Labels["io.flotilla.revision"] != "3" || got.Labels[LabelSpecHash] != "h" || got.Labels["tier"] != "front" {
		t.Errorf("labels = %v", got.Labels)
	}
	if len(desired.Labels) != 1 || len(got.TaskTemplate.ContainerSpec.Labels) != 1 {
		t.Errorf("desired labels %v, container labels %v changed", desired.Labels, got.TaskTemplate.ContainerSpec.Labels)
	}
}

func TestCurrentTasks(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	task := func(id string, slot int, state, desired swarm.TaskState, ts time.Time) swarm.Task {
		return swarm.Task{ID: id, Slot: slot, DesiredState: desired, Status: swarm.TaskStatus{State: state, Timestamp: ts}}
	}
	tasks := []swarm.Task{
		task("old-fail", 1, swarm.TaskStateFailed, swarm.TaskStateShutdown, at(1)),
		task("new-fail", 1, swarm.TaskStateFailed, swarm.TaskStateShutdown, at(2)),
		task("run", 1, swarm.TaskStateStarting, swarm.TaskStateRunning, at(3)),
		task("done", 2, swarm.TaskStateShutdown, swarm.TaskStateShutdown, at(4)),
	}
	got := currentTasks(tasks, true, swarm.TaskSpec{})
	if len(got) != 2 || got[0].ID != "run" || got[1].ID != "new-fail" {
		t.Fatalf("tasks = %+v, want run then new-fail", got)
	}
	if got[0].Health != "starting" {
		t.Errorf("health of a starting task with a healthcheck = %q", got[0].Health)
	}
}

// A service written through an API before 1.29 keeps its attachments in the
// deprecated ServiceSpec.Networks, which a 20.10 daemon returns as is; the
// moby api types have no such field, so a listing moves them to
// TaskTemplate.Networks, as a current daemon does on read. Attachments in
// TaskTemplate.Networks win, as there.
func TestListedService_movesAttachmentsOutOfTheDeprecatedSpecField(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"deprecated field only", `{"ID":"s1","Spec":{"Name":"old","Networks":[{"Target":"n1","Aliases":["web"]}],"TaskTemplate":{}}}`, []string{"n1"}},
		{"task template only", `{"ID":"s2","Spec":{"Name":"new","TaskTemplate":{"Networks":[{"Target":"n2"}]}}}`, []string{"n2"}},
		{"both", `{"ID":"s3","Spec":{"Name":"both","Networks":[{"Target":"n1"}],"TaskTemplate":{"Networks":[{"Target":"n2"}]}}}`, []string{"n2"}},
		{"neither", `{"ID":"s4","Spec":{"Name":"none","TaskTemplate":{}}}`, nil},
	} {
		var got []string
		if err := eachListed(strings.NewReader("["+tc.body+"]"), func(s listedService) {
			for _, n := range s.Spec.TaskTemplate.Networks {
				got = append(got, n.Target)
			}
		}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: attachments %v, want %v", tc.name, got, tc.want)
		}
	}
}
