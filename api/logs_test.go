package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
)

func logLines(n int, service string) []api.LogLine {
	out := make([]api.LogLine, n)
	for i := range out {
		out[i] = api.LogLine{Service: service, Task: "t1", Text: fmt.Sprintf("line %d", i)}
	}
	return out
}

func TestLogs_answerOneJSONLineEachBoundedByTail(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.LogLines = append(logLines(150, "web"), logLines(3, "worker")...)

	resp, b := e.do(t, "GET", "/api/v1/applications/shop/logs?service=web&tail=2", adminToken, "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || decode[api.LogLine](t, []byte(lines[1])).Text != "line 149" {
		t.Fatalf("tail=2 gave %q", lines)
	}
	// Without ?tail, the default.
	_, b = e.do(t, "GET", "/api/v1/applications/shop/logs", adminToken, "")
	if n := strings.Count(string(b), "\n"); n != api.DefaultLogTail {
		t.Fatalf("default tail gave %d lines, want %d", n, api.DefaultLogTail)
	}
}

func TestLogs_refuseATailOutOfBoundsAndAnUnknownService(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.LogLines = logLines(1, "web")
	for _, c := range []struct {
		query string
		want  int
	}{
		{"tail=10001", 400},
		{"tail=-1", 400},
		{"tail=many", 400},
		{"follow=often", 400},
		{"service=nope", 404},
		{"tail=10000", 200},
	} {
		resp, b := e.do(t, "GET", "/api/v1/applications/shop/logs?"+c.query, adminToken, "")
		if resp.StatusCode != c.want {
			t.Errorf("?%s: %d, want %d: %s", c.query, resp.StatusCode, c.want, b)
		}
	}
}

func TestLogs_followStopsReadingWhenTheClientGoesAway(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.LogLines = logLines(2, "web")
	e.ctl.LogsEnded = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/applications/shop/logs?follow=1", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for range 2 {
		if !sc.Scan() {
			t.Fatalf("the stream ended before its lines: %v", sc.Err())
		}
	}
	select {
	case <-e.ctl.LogsEnded:
		t.Fatal("a followed stream ended while its client was still there")
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	select {
	case <-e.ctl.LogsEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the controller was still asked for lines 10s after the client went away")
	}
}

func TestLogs_quietFollowedStreamSendsItsHeadersAtOnce(t *testing.T) {
	e := newEnv(t, nil)
	e.ctl.LogsEnded = make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/applications/shop/logs?follow=true&tail=0", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("no headers for a quiet followed stream: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestLogs_aProjectViewerReadsThemWhereTheProjectSaysViewerLogs(t *testing.T) {
	open := slices.Clone(testProjects)
	open[0].ViewerLogs = true
	for _, c := range []struct {
		projects []application.Project
		want     int
	}{{testProjects, 403}, {open, 200}} {
		path := filepath.Join(t.TempDir(), "tokens.yaml")
		writeTokensFile(t, path, "shop-viewer")
		tf, err := access.OpenTokenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, func(o *api.Options) { o.TokenFile = tf; o.Policy = access.NewPolicy(c.projects) })
		e.ctl.LogLines = logLines(1, "web")
		if resp, b := e.do(t, "GET", "/api/v1/applications/shop/logs", fileTokens["shop-viewer"], ""); resp.StatusCode != c.want {
			t.Errorf("viewerLogs %v: %d, want %d: %s", c.projects[0].ViewerLogs, resp.StatusCode, c.want, b)
		}
	}
}
