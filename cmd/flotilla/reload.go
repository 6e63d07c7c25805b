package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/reconcile"
)

// reloadInterval is how often the controller looks at its applications file.
const reloadInterval = 5 * time.Second

// watchApplications reloads the applications file when its content changes
// (checked every few seconds, and at once on SIGHUP) and hands the new set
// to the controller. A file that no longer validates is reported and the
// previous set kept: a typo never stops or removes a running application.
// Notification sinks are read at start only; projects go to policy.
func watchApplications(ctx context.Context, path string, ctl *reconcile.Controller, policy *access.Policy, logger *slog.Logger) {
	log := logger.With("component", "controller", "file", path)
	last, _ := os.ReadFile(path)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t := time.NewTicker(reloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-hup:
		}
		data, err := os.ReadFile(path)
		if err != nil {
			log.Error("cannot read the applications file; keeping the applications loaded before", "error", err)
			continue
		}
		if bytes.Equal(data, last) {
			continue
		}
		last = data
		reloadApplications(path, data, ctl, policy, log)
	}
}

// applicationSetter is the part of the controller a reload hands its result to.
type applicationSetter interface {
	SetApplications([]application.Application)
}

// reloadApplications parses data as the applications file at path and, only
// if all of it is valid, replaces the controller's set and the policy's
// projects (when policy is not nil) with it. It reports whether the set was
// replaced.
func reloadApplications(path string, data []byte, ctl applicationSetter, policy *access.Policy, log *slog.Logger) bool {
	file, err := application.Parse(path, data)
	if err != nil {
		log.Error("applications file is invalid; keeping the applications loaded before", "error", err)
		return false
	}
	if policy != nil {
		policy.SetProjects(file.Projects)
	}
	ctl.SetApplications(file.Applications)
	log.Info("applications file reloaded", "applications", len(file.Applications))
	return true
}
