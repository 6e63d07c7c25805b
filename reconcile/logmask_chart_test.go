package reconcile

import (
	"context"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
	"github.com/flotilla-gitops/flotilla/secretstore/vaulttest"
	"github.com/flotilla-gitops/flotilla/sopsage/sopsagetest"
)

// The logs' mask of a chart application, whose records are not rendered
// again: the values a controller rendered are blanked, and a record whose
// value it never rendered withholds the logs.

// sealedChart is a chart whose web service takes API_TOKEN from a
// SOPS-encrypted env file and mounts secret tok from a file of the chart.
func sealedChart(t *testing.T, token, tok, tag, recipient string) map[string]string {
	t.Helper()
	return map[string]string{
		"chart/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
		"chart/values.yaml": "tag: \"" + tag + "\"\n",
		"chart/templates/compose.yaml": `version: "3.8"
services:
  web:
    image: example/web:{{ .Values.tag }}
    env_file: ./files/web.env
    secrets: [tok]
secrets:
  tok:
    file: ./files/tok.txt
`,
		"chart/files/web.env": string(sopsagetest.Encrypt(t, "web.env", []byte("API_TOKEN="+token+"\n"), recipient)),
		"chart/files/tok.txt": tok + "\n",
	}
}

// sealedChartSetup deploys "shop" from sealedChart(token1, tok1, "1") as
// revision 1 and from second as revision 2 (chartRollbackSetup). It returns
// the controller that deployed both and a function that starts another, as
// a restart would: same swarm, repository and age key.
func sealedChartSetup(t *testing.T, token1, tok1 string, second func(recipient string) map[string]string) (*Controller, func() *Controller) {
	t.Helper()
	c, start, _, _ := chartRollbackSetup(t, token1, tok1, second)
	return c, start
}

func TestLogMaskOfAChartBlanksTheValuesItRenderedAndWithholdsTheOnesItDidNot(t *testing.T) {
	const token1, tok1 = "chart-old-token-4b1d", "chart-old-file-4b1d"
	const token2, tok2 = "chart-new-token-4b1d", "chart-new-file-4b1d"
	c, restart := sealedChartSetup(t, token1, tok1, func(r string) map[string]string { return sealedChart(t, token2, tok2, "1", r) })
	line := "old " + token1 + " " + tok1 + " new " + token2 + " " + tok2

	// The controller that rendered both revisions blanks the values of
	// both: a task revision 2 replaced printed the old ones.
	m, err := c.LogMask(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Blank(line); got != "old *** *** new *** ***" {
		t.Errorf("Blank = %q", got)
	}

	// A restarted controller renders only the new values: it withholds the
	// logs, naming revision 1 and its secret, never a value.
	fresh := restart()
	_, err = fresh.LogMask(context.Background(), "shop")
	if err == nil {
		t.Fatal("a restarted controller masked the logs without the values revision 1 deployed")
	}
	for _, want := range []string{`application "shop"`, "revision 1", `secret "tok"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	for _, v := range []string{token1, tok1, token2, tok2} {
		if strings.Contains(err.Error(), v) {
			t.Fatalf("the error holds a value: %v", err)
		}
	}
	// Its own passes render only the new values: still withheld.
	if res := mustReconcile(t, fresh, "shop"); res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, err := fresh.LogMask(context.Background(), "shop"); err == nil || !strings.Contains(err.Error(), "revision 1") {
		t.Fatalf("after the restarted controller's pass: %v", err)
	}
}

// Only the env file's value changed: the error says where revision 1 used
// the sealed value.
func TestLogMaskOfAChartNamesTheSealedValueItCannotBlank(t *testing.T) {
	const token1, token2, tok = "chart-env-old-9c2a", "chart-env-new-9c2a", "chart-same-file-9c2a"
	_, restart := sealedChartSetup(t, token1, tok, func(r string) map[string]string { return sealedChart(t, token2, tok, "1", r) })
	_, err := restart().LogMask(context.Background(), "shop")
	if err == nil || !strings.Contains(err.Error(), "revision 1") || !strings.Contains(err.Error(), "environment variable API_TOKEN of service web") {
		t.Fatalf("LogMask: %v", err)
	}
	if strings.Contains(err.Error(), token1) || strings.Contains(err.Error(), token2) {
		t.Fatalf("the error holds a value: %v", err)
	}
}

func TestLogMaskOfAChartWhoseSecretsDidNotChangeKeepsTheLogsAfterARestart(t *testing.T) {
	const token, tok = "chart-kept-token-61e0", "chart-kept-file-61e0"
	_, restart := sealedChartSetup(t, token, tok, func(r string) map[string]string { return sealedChart(t, token, tok, "2", r) })
	m, err := restart().LogMask(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Blank("token " + token + " file " + tok); got != "token *** file ***" {
		t.Errorf("Blank = %q", got)
	}
	if !strings.Contains(m.From, "recorded revisions") {
		t.Errorf("from %q", m.From)
	}
}

// A store that keeps versions gives a chart's render only the current
// value: after a restart the rotated-away one is unknown, and the logs are
// withheld naming revision 1 and the secret.
func TestLogMaskOfAChartWithholdsAStoreValueRotatedBeforeARestart(t *testing.T) {
	const pw1, pw2 = "chart-kv2-pw1-83d0-plaintext", "chart-kv2-pw2-83d0-plaintext"
	srv := vaulttest.Start(t)
	srv.Mount("kv", 2)
	_, tokenFile := srv.Token(t.TempDir(), "root")
	srv.Write("kv/data/shop/db", true, map[string]any{"password": pw1})
	b := chartstest.NewMinimal()
	f := newFakeFetcher()
	f.commit(t, vaultChart)
	app := vaultApp(t, srv, tokenFile)
	app.Source.Path = "chart"
	app.Source.Chart = &application.Chart{}
	c := newTestController(t, b, f, app)
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 1 {
		t.Fatalf("install: revision %d, %v", res.Revision, res.Err)
	}
	srv.Write("kv/data/shop/db", true, map[string]any{"password": pw2})
	if res := mustReconcile(t, c, "shop"); res.Err != nil || res.Revision != 2 {
		t.Fatalf("rotation: revision %d, %v", res.Revision, res.Err)
	}
	m, err := c.LogMask(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Blank("old " + pw1 + " new " + pw2); got != "old *** new ***" {
		t.Errorf("Blank = %q", got)
	}
	_, err = newTestController(t, b, f, app).LogMask(context.Background(), "shop")
	if err == nil || !strings.Contains(err.Error(), "revision 1") || !strings.Contains(err.Error(), `secret "db_password"`) {
		t.Fatalf("a restarted controller: %v", err)
	}
	if strings.Contains(err.Error(), pw1) || strings.Contains(err.Error(), pw2) {
		t.Fatalf("the error holds a value: %v", err)
	}
}
