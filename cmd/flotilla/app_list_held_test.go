package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
)

func TestAppListMarksAHeldApplicationAndSaysWhatHoldsIt(t *testing.T) {
	var b bytes.Buffer
	items := []api.ApplicationSummary{
		{Status: application.Status{Name: "shop", Sync: application.OutOfSync, SyncReason: application.ReasonGit, Health: application.Healthy,
			Waiting: "sync window: deny window \"0 18 * * 5\" for 60h0m0s is active until 2026-12-07T06:00:00Z"}},
		{Status: application.Status{Name: "blog", Sync: application.Synced, Health: application.Healthy}},
	}
	if err := printAppTable(&b, items, time.Now()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[1], "OutOfSync (git), held") || !strings.Contains(lines[1], "sync window") {
		t.Fatalf("held application's row: %q", lines[1])
	}
	if strings.Contains(lines[2], "held") {
		t.Fatalf("an application nothing holds is marked: %q", lines[2])
	}
}
