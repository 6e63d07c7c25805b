package backendtest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/backendtest"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

type broken struct {
	*chartstest.MinimalBackend
	mode string
}

func (b broken) Releases(ctx context.Context, n string) ([]charts.Release, error) {
	rs, err := b.MinimalBackend.Releases(ctx, n)
	switch b.mode {
	case "oldestfirst":
		slices.Reverse(rs)
	case "keepall":
	}
	return rs, err
}
func (b broken) RecordRelease(ctx context.Context, r charts.Release, keep int) error {
	switch b.mode {
	case "keepall":
		keep = 0
	case "dupok":
		_ = b.MinimalBackend.RecordRelease(ctx, r, keep)
		return nil
	case "dropfields":
		r.PinnedCommit = ""
	}
	return b.MinimalBackend.RecordRelease(ctx, r, keep)
}
func (b broken) RemoveStack(ctx context.Context, s string) error {
	if b.mode == "removenoop" {
		return nil
	}
	return b.MinimalBackend.RemoveStack(ctx, s)
}
func (b broken) StackServices(ctx context.Context, s string) []charts.ServiceState {
	st := b.MinimalBackend.StackServices(ctx, s)
	for i := range st {
		switch b.mode {
		case "scoped":
			st[i].Name = s + "_" + st[i].Name
		case "norunning":
			st[i].Running = 0
		case "nolabels":
			st[i].Labels = nil
		}
	}
	return st
}
func (b broken) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	switch b.mode {
	case "noheal":
		req.Heal = nil
	case "alwayswrite":
		req.Heal = []string{req.Stack + "_web", req.Stack + "_worker"}
	}
	return b.MinimalBackend.DeployStack(ctx, req)
}

func TestMutants(t *testing.T) {
	for _, m := range []string{"oldestfirst", "keepall", "dupok", "dropfields", "removenoop", "scoped", "norunning", "nolabels", "noheal", "alwayswrite"} {
		t.Run(m, func(t *testing.T) {
			b := broken{chartstest.NewMinimal(), m}
			backendtest.Run(t, func(*testing.T) charts.Backend { return b }, backendtest.Options{Timeout: 300e6})
		})
	}
}
