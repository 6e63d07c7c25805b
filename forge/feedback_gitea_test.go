package forge_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
)

// Against a real Gitea: a deploy's status moves pending -> success on one
// commit and pending -> failure on another, each visible through Gitea's
// own API with its context, description and link; the plan comment is
// created once and then edited in place, and a marker in someone else's
// comment is left alone.
func TestFeedbackAgainstARealGitea(t *testing.T) {
	g := forgetest.StartGitea(t)
	g.CreateRepo("web")
	first := g.Write("ann", "ann/web", "", "main", "compose.yaml", "services: {}\n")
	second := g.Write("ann", "ann/web", "", "main", "compose.yaml", "services: {web: {image: a}}\n")
	c := &forge.Client{Kind: forge.Gitea, API: g.API(), Token: g.Token("ann")}
	ctx := context.Background()

	post := func(sha string, st forge.State, desc string) {
		t.Helper()
		err := c.SetStatus(ctx, "ann/web", sha, forge.CommitStatus{State: st, Context: "flotilla/web",
			Description: desc, TargetURL: "https://flotilla.example.com/#/apps/web"})
		if err != nil {
			t.Fatal(err)
		}
	}
	post(first, forge.StatePending, "deploying")
	post(first, forge.StateSuccess, "revision 1 deployed")
	post(second, forge.StatePending, "deploying")
	post(second, forge.StateFailure, "render failed")
	for sha, want := range map[string][]string{first: {"success", "pending"}, second: {"failure", "pending"}} {
		got := g.Statuses("ann/web", sha)
		states := map[string]bool{}
		for _, s := range got {
			states[s.State] = true
			if s.Context != "flotilla/web" || s.TargetURL != "https://flotilla.example.com/#/apps/web" || s.Description == "" {
				t.Fatalf("status of %s: %+v", sha, s)
			}
		}
		if len(got) != 2 || !states[want[0]] || !states[want[1]] {
			t.Fatalf("statuses of %s: %+v, want %v", sha, got, want)
		}
		if s := g.CombinedState("ann/web", sha); s != want[0] {
			t.Fatalf("combined state of %s is %q, want %q", sha, s, want[0])
		}
	}

	g.Write("ann", "ann/web", "main", "change-1", "compose.yaml", "services: {web: {image: b}}\n")
	n := g.OpenPR("ann", "web", "change-1")
	marker := forge.PlanMarker("web")
	g.CommentAs("eve", "web", n, marker+"\nplanted by someone else")
	r1, err := c.UpsertComment(ctx, "ann/web", n, marker, "plan one")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.UpsertComment(ctx, "ann/web", n, marker, "plan two")
	if err != nil {
		t.Fatal(err)
	}
	r3, err := c.UpsertComment(ctx, "ann/web", n, marker, "plan two")
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Created || r2.Created || r2.ID != r1.ID || !r3.Unchanged {
		t.Fatalf("upserts %+v %+v %+v: want created, then edited in place, then unchanged", r1, r2, r3)
	}
	var ours []forgetest.Comment
	for _, cm := range g.Comments("web", n) {
		if strings.HasPrefix(cm.Body, marker) && cm.User.Login == "ann" {
			ours = append(ours, cm)
		}
		if cm.User.Login == "eve" && !strings.Contains(cm.Body, "planted") {
			t.Fatalf("eve's comment was edited: %q", cm.Body)
		}
	}
	if len(ours) != 1 || ours[0].Body != marker+"\nplan two" {
		t.Fatalf("comments with the marker: %+v, want one saying plan two", ours)
	}
}
