package reconcile

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/source"
)

func TestNewLogMask_blanksValuesTheirLinesAndBase64(t *testing.T) {
	pem := "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\nhkiG9w0BAQEFAASC\n-----END KEY-----\n"
	m := newLogMask("revision 1", []string{"s3cr3t-token\n", pem, "admin"})
	for _, tc := range []struct{ in, want string }{
		{"token=s3cr3t-token done", "token=*** done"},
		{"key line MIIEvQIBADANBgkq", "key line ***"},
		{"b64 " + base64.StdEncoding.EncodeToString([]byte("s3cr3t-token")), "b64 ***"},
		{"b64 " + base64.StdEncoding.EncodeToString([]byte("s3cr3t-token\n")), "b64 ***"},
		{"url " + base64.RawURLEncoding.EncodeToString([]byte(pem)), "url ***"},
		{"user admin logged in", "user admin logged in"},
		{"nothing secret here", "nothing secret here"},
	} {
		if got := m.Blank(tc.in); got != tc.want {
			t.Errorf("Blank(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := m.Blank(pem); strings.Contains(got, "MIIE") || strings.Contains(got, "hkiG") {
		t.Errorf("the whole multi-line value was not blanked: %q", got)
	}
}

func TestNewLogMask_withoutValuesBlanksNothing(t *testing.T) {
	m := newLogMask("revision 2", []string{"short", ""})
	if got := m.Blank("short and sweet"); got != "short and sweet" {
		t.Errorf("Blank = %q, want the line unchanged", got)
	}
	if (LogMask{}).Blank("x") != "x" {
		t.Error("the zero LogMask changed a line")
	}
}

const composeWithSecret = `version: "3.8"
services:
  web:
    image: example/web:1
    secrets: [tok]
secrets:
  tok:
    file: ./tok.txt
`

func TestLogMaskReproducesTheDeployedSecretsAndRefusesWhenItCannot(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	commit := f.commit(t, map[string]string{"docker-compose.yml": composeWithSecret, "tok.txt": "unit-secret-value\n"})
	f.commits[commit] = commit
	c := newTestController(t, b, f, testApp("shop", true))
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}

	// The pass's render is cached: no fetch is needed, so an unreachable
	// repository does not matter.
	f.err = fmt.Errorf("dial: %w", source.ErrUnreachable)
	m, err := c.LogMask(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Blank("tok=unit-secret-value"); got != "tok=***" || !strings.Contains(m.From, "revision 1") {
		t.Errorf("Blank = %q from %q", got, m.From)
	}

	// A restarted controller has no render and cannot fetch: it refuses.
	fresh := newTestController(t, b, f, testApp("shop", true))
	if _, err := fresh.LogMask(context.Background(), "shop"); !errors.Is(err, source.ErrUnreachable) {
		t.Fatalf("LogMask with the repository unreachable: %v", err)
	}
	// Once it can fetch, it renders the record's commit again.
	f.err = nil
	if m, err = fresh.LogMask(context.Background(), "shop"); err != nil || m.Blank("unit-secret-value") != "***" {
		t.Fatalf("LogMask after the repository came back: %v, %q", err, m.Blank("unit-secret-value"))
	}
	if _, err := fresh.LogMask(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LogMask of an unknown application: %v", err)
	}
}

func TestLogMaskOfADeployWithoutSecretsNeedsNoRepository(t *testing.T) {
	b, f, c := shopOnMinimal(t, true)
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}
	f.err = fmt.Errorf("dial: %w", source.ErrUnreachable)
	fresh := newTestController(t, b, f, testApp("shop", true))
	m, err := fresh.LogMask(context.Background(), "shop")
	if err != nil || m.Blank("listen 80") != "listen 80" {
		t.Fatalf("LogMask: %v", err)
	}
}

func TestLogMaskBlanksTheValuesOfEarlierRevisionsWhoseTasksMayStillHaveLogs(t *testing.T) {
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	c1 := f.commit(t, map[string]string{"docker-compose.yml": composeWithSecret, "tok.txt": "first-secret-value\n"})
	f.commits[c1] = c1
	c := newTestController(t, b, f, testApp("shop", true))
	if res := mustReconcile(t, c, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}
	c2 := f.commit(t, map[string]string{"docker-compose.yml": composeWithSecret, "tok.txt": "second-secret-value\n"})
	f.commits[c2] = c2
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("second pass: revision %d, %v", res.Revision, res.Err)
	}

	// The task revision 2 replaced printed the first value: both are
	// blanked, by this controller and by a restarted one.
	for what, ctl := range map[string]*Controller{"running": c, "restarted": newTestController(t, b, f, testApp("shop", true))} {
		m, err := ctl.LogMask(context.Background(), "shop")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := m.Blank("old first-secret-value new second-secret-value"); got != "old *** new ***" {
			t.Errorf("%s: Blank = %q", what, got)
		}
		if !strings.Contains(m.From, "revision 2") || !strings.Contains(m.From, "before it") {
			t.Errorf("%s: from %q", what, m.From)
		}
	}
	// Once reproduced, an earlier revision's values need no fetch.
	f.err = fmt.Errorf("dial: %w", source.ErrUnreachable)
	if m, err := c.LogMask(context.Background(), "shop"); err != nil || m.Blank("first-secret-value") != "***" {
		t.Fatalf("LogMask with the repository unreachable: %v", err)
	}
	// A restarted controller that cannot reproduce an earlier revision
	// withholds the logs.
	delete(f.commits, c1)
	f.err = nil
	if _, err := newTestController(t, b, f, testApp("shop", true)).LogMask(context.Background(), "shop"); err == nil || !strings.Contains(err.Error(), "revision 1") {
		t.Fatalf("LogMask without revision 1's commit: %v", err)
	}
}
