package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

func TestAppRolloutShowsStatusAndQueuesCommands(t *testing.T) {
	e := newCLIEnv(t)
	e.ctl.SetRollouts("shop", []application.RolloutStatus{{Service: "web", Colour: "web-canary", Strategy: "canary",
		Phase: "Progressing", Step: 1, Weight: 50, Replicas: 2, Reason: "step 1 (weight 50%): held until 04:00"}})
	c := e.client(t, cliAdminToken)
	var out bytes.Buffer
	if err := runAppRollout(t.Context(), c, appRolloutOptions{apiOptions: opts(outputTable), Command: "status", Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ROLLOUT", "web", "canary", "Progressing", "50%", "held until"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("status lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runAppGet(t.Context(), c, appGetOptions{apiOptions: opts(outputTable), Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ROLLOUT") || !strings.Contains(out.String(), "held until") {
		t.Fatalf("app get shows no rollout:\n%s", out.String())
	}
	out.Reset()
	if err := runAppRollout(t.Context(), c, appRolloutOptions{apiOptions: opts(outputTable), Command: "pause", Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "pause queued for the rollout of web") {
		t.Fatalf("output: %s", out.String())
	}
	if got := e.ctl.Commands(); len(got) != 1 || got[0] != "shop/web pause" {
		t.Fatalf("commands %v", got)
	}
	err := runAppRollout(t.Context(), c, appRolloutOptions{apiOptions: opts(outputTable), Command: "abort", Name: "shop", Service: "worker"}, &out)
	if err == nil || !strings.Contains(err.Error(), "no rollout of service") {
		t.Fatalf("abort of a service without a rollout: %v", err)
	}
	err = runAppRollout(t.Context(), e.client(t, cliReadToken), appRolloutOptions{apiOptions: opts(outputTable), Command: "promote", Name: "shop"}, &out)
	if err == nil || !strings.Contains(err.Error(), "needs operator") {
		t.Fatalf("promote with a read token: %v", err)
	}
}
