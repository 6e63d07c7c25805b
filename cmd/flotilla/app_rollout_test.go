package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

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

// --wait returns once a pass has deployed the command and shows the
// rollout; a command still pending at the deadline fails, saying where to
// see it.
func TestAppRolloutWaitsForThePassThatDeploysTheCommand(t *testing.T) {
	e := newCLIEnv(t)
	e.ctl.SetRollouts("shop", []application.RolloutStatus{{Service: "web", Colour: "web-canary", Strategy: "canary",
		Phase: "Progressing", Step: 1, Weight: 50, Replicas: 2, Reason: "step 1 (weight 50%): held until 04:00"}})
	c := e.client(t, cliAdminToken)

	var out bytes.Buffer
	if err := runAppRollout(t.Context(), c, appRolloutOptions{apiOptions: opts(outputTable), Command: "status", Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "PENDING") {
		t.Fatalf("nothing sent, yet:\n%s", out.String())
	}
	err := runAppRollout(t.Context(), c, appRolloutOptions{apiOptions: opts(outputTable), Command: "pause", Name: "shop", Wait: 600 * time.Millisecond}, &out)
	if err == nil || !strings.Contains(err.Error(), "no pass deployed it within") {
		t.Fatalf("a command no pass took: %v, want it reported as not deployed", err)
	}
	out.Reset()
	if err := runAppRollout(t.Context(), c, appRolloutOptions{apiOptions: opts(outputTable), Command: "status", Name: "shop"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "PENDING pause") {
		t.Fatalf("status does not show the pending command:\n%s", out.String())
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(e.ctl.Commands()) < 2 {
			time.Sleep(10 * time.Millisecond)
		}
		e.ctl.RunPass("shop")
	}()
	out.Reset()
	if err := runAppRollout(t.Context(), c, appRolloutOptions{apiOptions: opts(outputTable), Command: "promote", Name: "shop", Wait: time.Minute}, &out); err != nil {
		t.Fatalf("a command a pass deployed: %v", err)
	}
	<-done
	if s := out.String(); !strings.Contains(s, "ROLLOUT") || !strings.Contains(s, "Promoting") || strings.Contains(s, "PENDING") {
		t.Fatalf("after the pass, want the promoted rollout without a pending command:\n%s", s)
	}
}

// A controller that restarts before a pass takes a command forgets it, and
// its first pass leaves the command no longer pending with the rollout as
// it was. --wait must then fail, not print the unchanged rollout as if the
// command had been deployed; a command that found the rollout as asked
// already is done all the same.
func TestAppRolloutWaitFailsWhenTheControllerForgotTheCommand(t *testing.T) {
	for _, c := range []struct {
		name    string
		command string
		paused  bool
		wantErr string // "" for success
	}{
		{"a forgotten abort", "abort", false, "the rollout of web is not aborted (phase Progressing, step 1, weight 50%: step 1"},
		{"a forgotten pause", "pause", false, "is not paused"},
		{"a pause of a paused rollout", "pause", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newCLIEnv(t)
			e.ctl.SetRollouts("shop", []application.RolloutStatus{{Service: "web", Colour: "web-canary", Strategy: "canary",
				Phase: "Progressing", Step: 1, Weight: 50, Replicas: 2, Paused: c.paused, Reason: "step 1 (weight 50%): held until 04:00"}})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for len(e.ctl.Commands()) < 1 {
					time.Sleep(10 * time.Millisecond)
				}
				e.ctl.Restart("shop")
			}()
			var out bytes.Buffer
			err := runAppRollout(t.Context(), e.client(t, cliAdminToken), appRolloutOptions{apiOptions: opts(outputTable), Command: c.command, Name: "shop", Wait: time.Minute}, &out)
			<-done
			if c.wantErr == "" {
				if err != nil || !strings.Contains(out.String(), "Progressing") {
					t.Fatalf("%v, want success and the rollout:\n%s", err, out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "the controller restarted") {
				t.Fatalf("err %v, want one saying %q and why", err, c.wantErr)
			}
			if code := exitCodeOf(err); code != exitFailed {
				t.Fatalf("exit code %d, want %d", code, exitFailed)
			}
			if out.Len() != 0 {
				t.Fatalf("printed the unchanged rollout as if deployed:\n%s", out.String())
			}
		})
	}
}

// Tables print what repositories, routers and tasks wrote: an escape
// sequence in a rollout's reason must not reach the terminal, while JSON
// keeps the value exactly (escaped).
func TestTablesNeverPassControlCharactersToTheTerminal(t *testing.T) {
	e := newCLIEnv(t)
	t.Setenv(envToken, cliReadToken)
	t.Setenv(envTokenFile, "")
	hostile := "held\x1b]0;pwned\x07\x1b[2J\rspoofed\u009b31m"
	e.ctl.SetRollouts("shop", []application.RolloutStatus{{Service: "web", Colour: "web-canary", Strategy: "canary",
		Phase: "Progressing", Step: 0, Weight: 10, Reason: hostile}})
	for _, args := range [][]string{{"app", "rollout", "status", "shop"}, {"app", "get", "shop"}} {
		out, err := execute(t, append(args, "--server", e.srv.URL)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.ContainsAny(out, "\x1b\x07\r\u009b") || !strings.Contains(out, "held\uFFFD]0;pwned") {
			t.Errorf("%v printed control characters:\n%q", args, out)
		}
	}
	out, err := execute(t, "app", "get", "shop", "--server", e.srv.URL, "-o", "json")
	if err != nil || !strings.Contains(out, `held\u001b]0;pwned\u0007`) {
		t.Fatalf("-o json: %v, want the reason escaped as it is:\n%s", err, out)
	}
}
