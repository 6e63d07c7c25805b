package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/drift"
)

func TestAppDiff_againstARevisionAsksForThatRevisionAndSide(t *testing.T) {
	e := newCLIEnv(t)
	e.ctl.SetRevisionDiff("shop", 6, api.AgainstDeployed, api.Diff{
		Revision: "999999999999", Deployed: "aaaaaaaaaaaa",
		Manifest: "--- revision 7\n+++ revision 6\n-image: shop/web:2\n+image: shop/web:1\n",
	})
	e.ctl.SetRevisionDiff("shop", 6, api.AgainstDeclared, api.Diff{
		Manifest: "--- revision 6\n+++ declared\n-image: shop/web:1\n+image: shop/web:3\n",
	})
	c := e.client(t, cliReadToken)
	run := func(o appDiffOptions) (string, error) {
		var out bytes.Buffer
		o.apiOptions, o.Name = opts(outputTable), "shop"
		err := runAppDiff(t.Context(), c, o, &out)
		return out.String(), err
	}
	out, err := run(appDiffOptions{Revision: 6, Against: api.AgainstDeployed})
	if err != nil || !strings.Contains(out, "+image: shop/web:1") || strings.Contains(out, "shop/web:3") {
		t.Errorf("against deployed: err %v\n%s", err, out)
	}
	// Declared is the default side.
	out, err = run(appDiffOptions{Revision: 6})
	if err != nil || !strings.Contains(out, "+image: shop/web:3") {
		t.Errorf("against declared: err %v\n%s", err, out)
	}
	if _, err := run(appDiffOptions{Revision: 5}); err == nil || !strings.Contains(err.Error(), "revision 5") {
		t.Errorf("a revision with no record: err %v", err)
	}
	for _, bad := range []appDiffOptions{{Against: api.AgainstDeployed}, {Revision: 6, Against: "live"}, {Revision: -1}} {
		if _, err := run(bad); !isUsageError(err) {
			t.Errorf("%+v: err %v, want a usage error", bad, err)
		}
	}
}

func TestAppSync_dryRunWaitsAndPrintsThePlanAsATable(t *testing.T) {
	e := newCLIEnv(t)
	e.ctl.Result = func(_ string, o api.SyncOptions) api.SyncResult {
		if !o.DryRun {
			t.Errorf("sync options %+v, want a dry run", o)
		}
		return api.SyncResult{Action: "upgrade", Plan: &api.Diff{
			Services: []api.ServiceDiff{
				{Name: "web", Change: api.ServiceUpdate, Fields: []drift.Change{{Field: "image", Live: "shop/web:1", Desired: "shop/web:2"}}},
				{Name: "api", Change: api.ServiceCreate},
			},
			PendingRemovals: []string{"service shop_old"},
		}}
	}
	var out bytes.Buffer
	o := appSyncOptions{apiOptions: opts(outputTable), Name: "shop", DryRun: true, waitOptions: waitOptions{Timeout: time.Minute}}
	if err := runAppSync(t.Context(), e.client(t, cliAdminToken), o, &out, false); err != nil {
		t.Fatalf("err = %v\n%s", err, out.String())
	}
	// Columns are padded to the widest cell; compare with runs of spaces as one.
	cells := func(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }
	s := cells(out.String())
	for _, want := range []string{"dry run succeeded", "CHANGE OBJECT FIELD LIVE DECLARED", "update service web image shop/web:1 shop/web:2",
		"create service api", "remove (with --prune) service shop_old"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}

	// With --prune the removal is part of the plan; -o json is the API's answer.
	out.Reset()
	o.Prune = true
	if err := runAppSync(t.Context(), e.client(t, cliAdminToken), o, &out, false); err != nil || !strings.Contains(cells(out.String()), "\nremove service shop_old") {
		t.Errorf("with prune: err %v\n%s", err, out.String())
	}
	out.Reset()
	o.Output = outputJSON
	if err := runAppSync(t.Context(), e.client(t, cliAdminToken), o, &out, false); err != nil {
		t.Fatal(err)
	}
	var r api.OperationResponse
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Plan == nil || len(r.Plan.Services) != 2 {
		t.Errorf("json: %v %+v\n%s", err, r, out.String())
	}
}
