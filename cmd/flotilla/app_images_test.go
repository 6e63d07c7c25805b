package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/application"
)

// shopImages is what image automation reports for shop: a committed
// update, a tag held back, and a field whose registry refused the
// credentials with an escape sequence in its answer.
func shopImages(now time.Time) *application.ImageStatus {
	return &application.ImageStatus{
		LastRun: now.Add(-2 * time.Minute), LastCommit: "9b1f" + strings.Repeat("a", 36), LastCommitTime: now.Add(-90 * time.Minute),
		LastError: "push to https://git.example.com/ops/shop.git: rejected",
		Fields: []application.ImageField{
			{Image: "registry.example.com/shop/web", File: "compose.yaml", Field: "services.web.image",
				Current: "registry.example.com/shop/web:1.4.2", Newest: "1.4.2", Outcome: "update"},
			{Image: "registry.example.com/shop/api", File: "values-eu.yaml", Field: "api.image.tag",
				Current: "2.0.0", Newest: "1.9.0", Outcome: "backwards", Reason: "2.0.0 is newer than 1.9.0"},
			{Image: "registry.example.com/shop/worker", File: "compose.yaml", Field: "services.worker.image",
				Outcome: "error", Reason: "list tags: 401 \x1b[2J\x1b]0;pwned\x07Unauthorized"},
		},
	}
}

func TestAppGetShowsTheImagesWatchedTheNewestSeenAndTheLastCommit(t *testing.T) {
	e := newCLIEnv(t)
	e.ctl.SetImages("shop", shopImages(time.Now()))
	c := e.client(t, cliReadToken)

	var out bytes.Buffer
	if err := runAppGet(t.Context(), c, appGetOptions{apiOptions: opts(outputTable), Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"Image updates: last run 2m ago; last commit 9b1faaaa (1h ago)",
		"Image error: push to https://git.example.com/ops/shop.git: rejected",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("app get lacks %q:\n%s", want, s)
		}
	}
	rows := tableAfter(t, s, "IMAGE")
	want := [][]string{
		{"IMAGE", "FILE", "FIELD", "CURRENT", "NEWEST", "OUTCOME", "REASON"},
		{"registry.example.com/shop/web", "compose.yaml", "services.web.image", "registry.example.com/shop/web:1.4.2", "1.4.2", "update"},
		{"registry.example.com/shop/api", "values-eu.yaml", "api.image.tag", "2.0.0", "1.9.0", "backwards", "(held)", "2.0.0", "is", "newer", "than", "1.9.0"},
		{"registry.example.com/shop/worker", "compose.yaml", "services.worker.image", "-", "-", "error", "list", "tags:", "401", "\ufffd[2J\ufffd]0;pwned\ufffdUnauthorized"},
	}
	if len(rows) != len(want) {
		t.Fatalf("images table has %d lines, want %d:\n%s", len(rows), len(want), s)
	}
	for i := range want {
		if strings.Join(rows[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("images line %d = %q, want %q", i, rows[i], want[i])
		}
	}
	if strings.ContainsRune(s, '\x1b') || strings.ContainsRune(s, '\x07') {
		t.Errorf("a registry's escape sequence reached the terminal: %q", s)
	}

	// An application without image updates has no such table.
	out.Reset()
	if err := runAppGet(t.Context(), c, appGetOptions{apiOptions: opts(outputTable), Name: "billing"}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "IMAGE") || strings.Contains(out.String(), "Image updates") {
		t.Errorf("billing, without image updates, shows them:\n%s", out.String())
	}
}

func TestAppGetJSONAndYAMLCarryTheImagesSection(t *testing.T) {
	e := newCLIEnv(t)
	now := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	e.ctl.SetImages("shop", shopImages(now))
	c := e.client(t, cliReadToken)

	for _, format := range []string{outputJSON, outputYAML} {
		var out bytes.Buffer
		if err := runAppGet(t.Context(), c, appGetOptions{apiOptions: opts(format), Name: "shop"}, &out); err != nil {
			t.Fatal(err)
		}
		var st application.Status
		var err error
		if format == outputJSON {
			err = json.Unmarshal(out.Bytes(), &st)
		} else {
			// YAML as printed, re-encoded as JSON to read it with the API's own tags.
			var v any
			if err = yaml.Unmarshal(out.Bytes(), &v); err == nil {
				var b []byte
				if b, err = json.Marshal(v); err == nil {
					err = json.Unmarshal(b, &st)
				}
			}
		}
		if err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out.String())
		}
		want := shopImages(now)
		if st.Images == nil || st.Images.LastCommit != want.LastCommit || !st.Images.LastCommitTime.Equal(want.LastCommitTime) ||
			st.Images.LastError != want.LastError || len(st.Images.Fields) != 3 || st.Images.Fields[1] != want.Fields[1] ||
			st.Images.Fields[2].Reason != want.Fields[2].Reason {
			t.Errorf("-o %s: images = %+v, want %+v", format, st.Images, want)
		}
	}
}

// tableAfter returns the whitespace-split lines of the table whose header
// starts with head, up to the next blank line.
func tableAfter(t *testing.T, s, head string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, head) {
			in = true
		}
		if !in {
			continue
		}
		if strings.TrimSpace(l) == "" {
			break
		}
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func TestAppGetNamesThePullRequestTheImageUpdatesAreProposedIn(t *testing.T) {
	e := newCLIEnv(t)
	im := shopImages(time.Now())
	im.PullRequest = &application.ImagePullRequestStatus{Number: 42, URL: "https://git.example.com/ops/shop/pulls/42", Branch: "flotilla/images/shop", Base: "main"}
	e.ctl.SetImages("shop", im)
	var out bytes.Buffer
	if err := runAppGet(t.Context(), e.client(t, cliReadToken), appGetOptions{apiOptions: opts(outputTable), Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "; pull request #42 (flotilla/images/shop into main)") {
		t.Fatalf("app get does not name the pull request:\n%s", out.String())
	}
}
