package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

func TestStatus_listsWhatNeedsAttention(t *testing.T) {
	e := newCLIEnv(t)
	var out bytes.Buffer
	err := runStatus(t.Context(), e.client(t, cliReadToken), statusOptions{apiOptions{Output: outputTable}}, &out)
	if exitCodeOf(err) != exitFailed {
		t.Fatalf("err = %v, want exit 1 while shop is OutOfSync", err)
	}
	s := out.String()
	for _, want := range []string{": ready", "applications: 2, 1 Synced, 1 OutOfSync", "health: 1 Healthy, 1 Progressing", "needs attention", "shop"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s[strings.Index(s, "needs attention"):], "billing") {
		t.Errorf("billing is fine but listed:\n%s", s)
	}

	out.Reset()
	_ = runStatus(t.Context(), e.client(t, cliReadToken), statusOptions{apiOptions{Output: outputJSON}}, &out)
	var rep statusReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if rep.Applications != 2 || rep.Sync[application.OutOfSync] != 1 || len(rep.Attention) != 1 {
		t.Fatalf("report = %+v", rep)
	}
}

func TestStatus_allGoodExitsZero(t *testing.T) {
	e := newCLIEnv(t)
	// A waited sync of shop makes it Synced and Healthy in the fake.
	if err := runAppSync(t.Context(), e.client(t, cliAdminToken), appSyncOptions{apiOptions: opts(outputTable), Name: "shop",
		waitOptions: waitOptions{Wait: true, Timeout: 10e9}}, &bytes.Buffer{}, false); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runStatus(t.Context(), e.client(t, cliReadToken), statusOptions{apiOptions{Output: outputTable}}, &out); err != nil {
		t.Fatalf("err = %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "all applications are Synced and Healthy") {
		t.Fatalf("output: %s", out.String())
	}
}

func TestStatus_saysWhetherAnHAControllerLeadsOrStandsByAndTheEpoch(t *testing.T) {
	for _, c := range []struct {
		rep  statusReport
		want string
	}{
		{statusReport{Ready: true, Role: "leader", Leader: "a", Epoch: 3}, "ready (leader, epoch 3)"},
		{statusReport{Ready: true, Role: "standby", Leader: "a", Epoch: 3}, "ready (standby: a leads, epoch 3; writes go there)"},
		{statusReport{Ready: true, Role: "standby", Epoch: 3}, "ready (standby: no leader right now, last epoch 3)"},
		{statusReport{Ready: true}, "ready\n"},
	} {
		var out bytes.Buffer
		printStatusReport(&out, c.rep)
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("report %+v printed\n%s\nwant %q", c.rep, out.String(), c.want)
		}
	}
}
