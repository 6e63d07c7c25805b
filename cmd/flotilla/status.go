package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/client"
)

// statusOptions are the flags of `flotilla status`.
type statusOptions struct {
	apiOptions
}

// statusReport is what `flotilla status -o json` prints.
type statusReport struct {
	Server string `json:"server"`
	Ready  bool   `json:"ready"`
	// NotReady is the controller's reason when Ready is false.
	NotReady string `json:"notReady,omitempty"`
	// ConfigProblem is why the newest applications file was not loaded.
	ConfigProblem string `json:"configProblem,omitempty"`
	// Role is "leader" or "standby" for a controller run with --ha, with
	// the lease's Leader and Epoch; empty otherwise.
	Role         string                     `json:"role,omitempty"`
	Leader       string                     `json:"leader,omitempty"`
	Epoch        uint64                     `json:"epoch,omitempty"`
	Applications int                        `json:"applications"`
	Sync         map[application.Sync]int   `json:"sync"`
	Health       map[application.Health]int `json:"health"`
	// Attention lists the applications that are not Synced and Healthy.
	Attention []api.ApplicationSummary `json:"attention"`
}

func newStatusCmd() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Summarise a running controller: readiness and what needs attention",
		Long: `Status asks the controller whether it is ready, counts its applications by sync
and health, and lists those that are not Synced and Healthy. It exits 1 when the
controller is not ready, some application needs attention, or the newest
applications file was not loaded (it says why), so it can gate a script.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPI(cmd, &o.apiOptions, requestTimeout, func(ctx context.Context, c *client.Client) error {
				return runStatus(ctx, c, *o, cmd.OutOrStdout())
			})
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

func runStatus(ctx context.Context, c *client.Client, o statusOptions, w io.Writer) error {
	rep := statusReport{Server: c.Server(), Ready: true, Sync: map[application.Sync]int{}, Health: map[application.Health]int{}}
	rd, err := c.Readiness(ctx)
	if err != nil {
		if !client.IsStatus(err, 503) {
			return fmt.Errorf("status: %w", err)
		}
		rep.Ready, rep.NotReady = false, err.Error()
	}
	rep.Role, rep.Leader, rep.Epoch = rd.Role, rd.Leader, rd.Epoch
	list, err := c.Applications(ctx)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	rep.Applications = len(list.Items)
	rep.ConfigProblem = list.ConfigProblem
	rep.Attention = []api.ApplicationSummary{}
	for _, a := range list.Items {
		rep.Sync[a.Sync]++
		rep.Health[a.Health]++
		if a.Sync != application.Synced || (a.Health != application.Healthy && a.Health != application.Suspended) || a.LastError != "" {
			rep.Attention = append(rep.Attention, a)
		}
	}
	if o.Output != outputTable {
		if err := printObject(w, o.Output, rep); err != nil {
			return err
		}
	} else {
		printStatusReport(w, rep)
	}
	if !rep.Ready || len(rep.Attention) > 0 || rep.ConfigProblem != "" {
		return errFailed
	}
	return nil
}

func printStatusReport(w io.Writer, rep statusReport) {
	ready := "ready"
	if !rep.Ready {
		ready = "NOT READY: " + rep.NotReady
	}
	switch {
	case rep.Role == "leader":
		ready += fmt.Sprintf(" (leader, epoch %d)", rep.Epoch)
	case rep.Role == "standby" && rep.Leader != "":
		ready += fmt.Sprintf(" (standby: %s leads, epoch %d; writes go there)", rep.Leader, rep.Epoch)
	case rep.Role == "standby":
		ready += fmt.Sprintf(" (standby: no leader right now, last epoch %d)", rep.Epoch)
	}
	fmt.Fprintf(w, "controller %s: %s\n", rep.Server, ready)
	if rep.ConfigProblem != "" {
		fmt.Fprintf(w, "applications file NOT LOADED (running the one before): %s\n", rep.ConfigProblem)
	}
	fmt.Fprintf(w, "applications: %d", rep.Applications)
	for _, s := range []application.Sync{application.Synced, application.OutOfSync, application.SyncUnknown} {
		if n := rep.Sync[s]; n > 0 {
			fmt.Fprintf(w, ", %d %s", n, s)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "health:")
	sep := " "
	for _, h := range []application.Health{application.Healthy, application.Suspended, application.Progressing,
		application.Missing, application.Degraded, application.HealthUnknown} {
		if n := rep.Health[h]; n > 0 {
			fmt.Fprintf(w, "%s%d %s", sep, n, h)
			sep = ", "
		}
	}
	fmt.Fprintln(w)
	if len(rep.Attention) == 0 {
		fmt.Fprintln(w, "all applications are Synced and Healthy")
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "needs attention:")
	_ = printAppTable(w, rep.Attention, time.Now())
}
