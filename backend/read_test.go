package backend

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

func TestReadStacks_readsManyStacksFromOneSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	one, two := swarmtest.Name(t, "reada"), swarmtest.Name(t, "readb")
	missing := swarmtest.Name(t, "readnone")
	for _, s := range []string{one, two} {
		swarmtest.Cleanup(t, s)
		deploy(t, b, s, fixture{Replicas: 1}, nil)
	}
	waitRunning(t, b, one)
	waitRunning(t, b, two)

	before := b.Stats()
	got, err := b.ReadStacks(ctx, []string{one, two, missing})
	if err != nil {
		t.Fatal(err)
	}
	d := b.Stats().Sub(before)
	if d.Requests["service.list"] != 1 || d.Requests["task.list"] != 1 || d.Writes != 0 {
		t.Errorf("requests %v, want one service and one task listing", d.Requests)
	}
	for _, s := range []string{one, two} {
		if len(got[s]) != 3 {
			t.Fatalf("%s: %d services, want 3", s, len(got[s]))
		}
		web := got[s][1]
		if web.Name != "web" || web.Mode != "replicated" || web.Desired != 1 || web.Running != 1 || web.Image != swarmtest.Image {
			t.Errorf("%s web = %+v", s, web)
		}
		if len(web.Tasks) != 1 || web.Tasks[0].State != "running" || web.Tasks[0].Slot != 1 {
			t.Errorf("%s web tasks = %+v", s, web.Tasks)
		}
		if web.Labels["tier"] != "front" || web.Version == 0 || web.ID == "" {
			t.Errorf("%s web labels %v, version %d, id %q", s, web.Labels, web.Version, web.ID)
		}
	}
	if states, ok := got[missing]; !ok || states == nil || len(states) != 0 {
		t.Errorf("stack that does not exist = %#v (present %v), want an empty list", states, ok)
	}
}

func TestReadStacks_reportsAnUnreadableDaemon(t *testing.T) {
	t.Parallel()
	b, err := New(context.Background(), Options{Host: "unix:///nonexistent/docker.sock", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New must not need the daemon: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := b.ReadStacks(ctx, []string{"a", "b"}); err == nil || m != nil {
		t.Errorf("ReadStacks = %v, %v; want no map and an error", m, err)
	}
	if s, err := b.ReadStackServices(ctx, "a"); err == nil || s != nil {
		t.Errorf("ReadStackServices = %v, %v; want an error", s, err)
	}
	if s := b.StackServices(ctx, "a"); s != nil {
		t.Errorf("StackServices = %v, want nil", s)
	}
	if _, err := b.Releases(ctx, "a"); err == nil {
		t.Error("Releases on an unreadable daemon succeeded")
	}
}

func TestReleases_recordKeepAndSurviveRemoveStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "rec")
	swarmtest.Cleanup(t, stack)
	deploy(t, b, stack, fixture{}, nil)

	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for rev := 1; rev <= 12; rev++ {
		r := charts.Release{
			Name: stack, Revision: rev, Owner: "ctl-1/app", Commit: fmt.Sprintf("c0ffee%02d", rev),
			Manifest: "manifest " + strconv.Itoa(rev), Time: base.Add(time.Duration(rev) * time.Minute), Trigger: "automated",
		}
		if err := b.RecordRelease(ctx, r, 10); err != nil {
			t.Fatalf("record revision %d: %v", rev, err)
		}
	}
	check := func(when string) {
		t.Helper()
		got, err := b.Releases(ctx, stack)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 10 {
			t.Fatalf("%s: %d records, want 10", when, len(got))
		}
		for i, r := range got {
			rev := 12 - i
			want := charts.Release{
				Name: stack, Revision: rev, Owner: "ctl-1/app", Commit: fmt.Sprintf("c0ffee%02d", rev),
				Manifest: "manifest " + strconv.Itoa(rev), Time: base.Add(time.Duration(rev) * time.Minute), Trigger: "automated",
			}
			if !r.Time.Equal(want.Time) {
				t.Errorf("%s: record %d time %v, want %v", when, i, r.Time, want.Time)
			}
			r.Time = want.Time
			if r.Version == 0 {
				t.Errorf("%s: record %d has no object version", when, i)
			}
			r.Version = 0
			if !reflect.DeepEqual(r, want) {
				t.Errorf("%s: record %d = %+v, want %+v", when, i, r, want)
			}
		}
	}
	check("after recording")

	latest, err := b.LatestRelease(ctx, stack)
	if err != nil || latest == nil || latest.Revision != 12 {
		t.Errorf("LatestRelease = %+v, %v", latest, err)
	}
	err = b.RecordRelease(ctx, charts.Release{Name: stack, Revision: 12, Manifest: "other"}, 10)
	if err == nil || !strings.Contains(err.Error(), "already recorded") {
		t.Errorf("recording revision 12 again: %v, want a refusal", err)
	}

	// Records are not the stack's objects: neither RemoveStack nor a
	// namespace listing sees them, and RemoveConfig refuses them.
	configs, err := b.LiveConfigs(ctx, stack)
	if err != nil {
		t.Fatal(err)
	}
	for name := range configs {
		if strings.HasPrefix(name, recordPrefix) {
			t.Errorf("LiveConfigs lists the record %s", name)
		}
	}
	if err := b.RemoveStack(ctx, stack); err != nil {
		t.Fatal(err)
	}
	check("after RemoveStack")
	recs, err := b.records(ctx, stack)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveConfig(ctx, recs[0].ID); err == nil {
		t.Error("RemoveConfig removed a release record")
	}
	if n, _ := b.LatestRelease(ctx, swarmtest.Name(t, "norecords")); n != nil {
		t.Errorf("LatestRelease of a release without records = %+v", n)
	}
}

func TestRecordRelease_refusesARecordOverSwarmsLimit(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	stack := swarmtest.Name(t, "big")
	swarmtest.Cleanup(t, stack)
	// Random-looking text does not compress below the limit.
	var sb strings.Builder
	for i := 0; sb.Len() < 2*maxRecordSize; i++ {
		fmt.Fprintf(&sb, "%x", uint64(i)*0x9E3779B97F4A7C15)
	}
	before := b.Stats()
	err := b.RecordRelease(context.Background(), charts.Release{Name: stack, Revision: 1, Manifest: sb.String()}, 0)
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("error = %v, want the size limit", err)
	}
	if d := b.Stats().Sub(before); d.Writes != 0 {
		t.Errorf("refused record sent %d writes", d.Writes)
	}
}

func TestReadStacks_reportsFailingTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBackend(t)
	stack := swarmtest.Name(t, "fail")
	swarmtest.Cleanup(t, stack)
	deploy(t, b, stack, fixture{Replicas: 1}, nil)

	updateBehindBack(t, services(t, b, stack)["cache"].ID, func(s *swarm.ServiceSpec) {
		s.TaskTemplate.ContainerSpec.Args = []string{"exit", "3"}
	})
	// The task must start and exit first: minutes on a loaded machine.
	swarmtest.Eventually(t, 3*time.Minute, func() (bool, string) {
		states, err := b.ReadStackServices(ctx, stack)
		if err != nil {
			return false, err.Error()
		}
		for _, st := range states {
			if st.Name != "cache" {
				continue
			}
			for _, task := range st.Tasks {
				if task.State == "failed" && strings.Contains(task.Err, "3") {
					return true, ""
				}
			}
			return false, fmt.Sprintf("cache tasks %+v", st.Tasks)
		}
		return false, "no cache service"
	})
}
