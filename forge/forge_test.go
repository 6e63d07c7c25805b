package forge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/internal/forgetest"
)

func sha(n int) string { return fmt.Sprintf("%040x", n) }

func TestListOpenReadsEveryPageOfBothForgesAndOnlyOpenPullRequests(t *testing.T) {
	for _, kind := range []string{forge.GitHub, forge.Gitea} {
		t.Run(kind, func(t *testing.T) {
			srv := forgetest.New(t, "shop/web")
			var prs []forgetest.PR
			for n := 1; n <= 230; n++ {
				prs = append(prs, forgetest.PR{Number: n, HeadSHA: sha(n), HeadRepo: "shop/web", Author: "dev"})
			}
			prs = append(prs, forgetest.PR{Number: 231, HeadSHA: sha(231), HeadRepo: "shop/web", State: "closed"})
			srv.Set(prs...)
			api := srv.GitHubAPI()
			if kind == forge.Gitea {
				api = srv.GiteaAPI()
			}
			c := &forge.Client{Kind: kind, API: api}
			got, err := c.ListOpen(context.Background(), "shop/web")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 230 {
				t.Fatalf("%d pull requests, want 230 (every page, closed left out)", len(got))
			}
			wantPages := 3 // 100 per page
			if kind == forge.Gitea {
				wantPages = 5 // 50 per page
			}
			if srv.Requests != wantPages {
				t.Fatalf("%d requests, want %d", srv.Requests, wantPages)
			}
			for _, p := range got {
				if p.Fork || p.HeadSHA != sha(p.Number) || p.Author != "dev" {
					t.Fatalf("%+v", p)
				}
			}
		})
	}
}

func TestListOpenMarksForksAndDeletedForksAndKeepsLabelsAndAssociation(t *testing.T) {
	srv := forgetest.New(t, "shop/web")
	srv.Set(
		forgetest.PR{Number: 1, HeadSHA: sha(1), HeadRepo: "shop/web", Labels: []string{"preview"}, Assoc: "MEMBER", Author: "ann"},
		forgetest.PR{Number: 2, HeadSHA: sha(2), HeadRepo: "mallory/web", Author: "mallory", Assoc: "NONE"},
		forgetest.PR{Number: 3, HeadSHA: sha(3), HeadRepo: ""},
		forgetest.PR{Number: 4, HeadSHA: sha(4), HeadRepo: "Shop/Web"},
	)
	got, err := (&forge.Client{Kind: forge.GitHub, API: srv.GitHubAPI()}).ListOpen(context.Background(), "shop/web")
	if err != nil {
		t.Fatal(err)
	}
	by := map[int]forge.PullRequest{}
	for _, p := range got {
		by[p.Number] = p
	}
	if p := by[1]; p.Fork || p.AuthorAssociation != "MEMBER" || len(p.Labels) != 1 || p.Labels[0] != "preview" || p.UpdatedAt.IsZero() {
		t.Fatalf("same-repository pull request: %+v", p)
	}
	if !by[2].Fork || by[2].HeadRepo != "mallory/web" {
		t.Fatalf("fork: %+v", by[2])
	}
	if !by[3].Fork {
		t.Fatalf("a head repository the forge no longer knows must count as a fork: %+v", by[3])
	}
	if by[4].Fork {
		t.Fatalf("owner and name compare without case: %+v", by[4])
	}
}

func TestListOpenDropsClosedItemsAForgeSendsAnyway(t *testing.T) {
	srv := forgetest.New(t, "shop/web")
	srv.IgnoreState = true
	srv.Set(forgetest.PR{Number: 1, HeadSHA: sha(1), HeadRepo: "shop/web"},
		forgetest.PR{Number: 2, HeadSHA: sha(2), HeadRepo: "shop/web", State: "closed", Merged: true})
	got, err := (&forge.Client{Kind: forge.Gitea, API: srv.GiteaAPI()}).ListOpen(context.Background(), "shop/web")
	if err != nil || len(got) != 1 || got[0].Number != 1 {
		t.Fatalf("%+v %v", got, err)
	}
}

// Hostile or broken answers fail the listing, never shorten it.
func TestListOpenRefusesAnswersOverTheLimitsAndHangingServers(t *testing.T) {
	item := func(n int) string {
		return fmt.Sprintf(`{"number":%d,"state":"open","head":{"sha":"%s","repo":{"full_name":"shop/web"}}}`, n, sha(n))
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		timeout time.Duration
		want    string
	}{
		{"oversized page", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`[` + item(1) + `,{"number":2,"state":"open","title":"`))
			w.Write([]byte(strings.Repeat("A", forge.MaxPageBytes)))
			w.Write([]byte(`"}]`))
		}, 0, "over"},
		{"endless full pages", func(w http.ResponseWriter, r *http.Request) {
			items := make([]string, 100)
			for i := range items {
				items[i] = item(i + 1)
			}
			w.Write([]byte("[" + strings.Join(items, ",") + "]"))
		}, 0, "more than 20 pages"},
		{"hanging server", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, 300 * time.Millisecond, "deadline"},
		{"trickling body", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("["))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, 300 * time.Millisecond, "deadline"},
		{"head without a SHA", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`[{"number":1,"state":"open","head":{"sha":"main","repo":{"full_name":"shop/web"}}}]`))
		}, 0, "no head commit SHA"},
		{"redirect elsewhere", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest/", http.StatusFound)
		}, 0, "302"},
		{"error status", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "rate limited", http.StatusForbidden)
		}, 0, "403"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c := &forge.Client{Kind: forge.GitHub, API: srv.URL, Timeout: tc.timeout}
			start := time.Now()
			got, err := c.ListOpen(context.Background(), "shop/web")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %d pull requests, error %v; want an error with %q", len(got), err, tc.want)
			}
			if got != nil {
				t.Fatalf("a failed listing returned %d pull requests", len(got))
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("took %s", time.Since(start))
			}
			if strings.Contains(tc.name, "over") && !errors.Is(err, forge.ErrTooLarge) {
				t.Fatalf("%v is not ErrTooLarge", err)
			}
		})
	}
}

func TestListOpenSendsTheTokenAndRefusesBadRepositoryNames(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Write([]byte("[]"))
	}))
	defer srv.Close()
	c := &forge.Client{Kind: forge.Gitea, API: srv.URL + "/api/v1", Token: "s3cret"}
	if _, err := c.ListOpen(context.Background(), "shop/web"); err != nil || auth != "token s3cret" {
		t.Fatalf("%v %q", err, auth)
	}
	for _, bad := range []string{"shop", "shop/web/x", "../x", "shop/..", "sh op/web", "shop/we?b"} {
		if _, err := c.ListOpen(context.Background(), bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func TestDeriveKnowsGitHubOnly(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/shop/web.git": "shop/web",
		"git@github.com:shop/web":         "shop/web",
		"https://github.com/shop/web/":    "shop/web",
	} {
		k, api, repo, ok := forge.Derive(in)
		if !ok || k != forge.GitHub || api != "https://api.github.com" || repo != want {
			t.Fatalf("%s: %s %s %s %v", in, k, api, repo, ok)
		}
	}
	for _, in := range []string{"https://git.example.com/shop/web.git", "https://github.com.evil.example/shop/web", "https://github.com/shop"} {
		if _, _, _, ok := forge.Derive(in); ok {
			t.Fatalf("%s derived", in)
		}
	}
}
