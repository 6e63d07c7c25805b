package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/client"
)

// appRolloutOptions are the arguments of `flotilla app rollout`.
type appRolloutOptions struct {
	*apiOptions
	Command string // status or one of api.RolloutCommands
	Name    string
	Service string // empty: every rollout (status) or the only one
}

func newAppRolloutCmd(parent *apiOptions) *cobra.Command {
	o := appRolloutOptions{apiOptions: parent}
	verbs := append([]string{"status"}, api.RolloutCommands...)
	return &cobra.Command{
		Use:   "rollout " + strings.Join(verbs, "|") + " NAME [SERVICE]",
		Short: "Show or steer the canary and blue/green rollouts of an application",
		Long: `status shows each rollout: phase, step, traffic weight, replicas and the
reason of the last decision. The other commands are handed to the rollout of
SERVICE (which may be left out when the application has one rollout) and taken
by the next pass, once:

  promote  update the stable service to the new version now (also after an abort)
  abort    all traffic back on the stable service, the new colour scaled to zero
  pause    freeze the weights until resume
  resume   lift a pause; the current step's pause starts again
  retry    start an aborted rollout again from its first step`,
		Args:      cobra.RangeArgs(2, 3),
		ValidArgs: verbs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Command, o.Name = args[0], args[1]
			if len(args) == 3 {
				o.Service = args[2]
			}
			if !slices.Contains(verbs, o.Command) {
				return usageError{fmt.Errorf("%q is not one of %s", o.Command, strings.Join(verbs, ", "))}
			}
			return runAPI(cmd, o.apiOptions, requestTimeout, func(ctx context.Context, c *client.Client) error {
				return runAppRollout(ctx, c, o, cmd.OutOrStdout())
			})
		},
	}
}

func runAppRollout(ctx context.Context, c *client.Client, o appRolloutOptions, w io.Writer) error {
	if o.Command != "status" {
		r, err := c.RolloutCommand(ctx, o.Name, o.Command, o.Service)
		if err != nil {
			return fmt.Errorf("rollout %s %s: %w", o.Command, o.Name, err)
		}
		if o.Output != outputTable {
			return printObject(w, o.Output, r)
		}
		_, err = fmt.Fprintf(w, "%s: %s\n", o.Name, r.Message)
		return err
	}
	st, err := c.Application(ctx, o.Name)
	if err != nil {
		return fmt.Errorf("rollout status %s: %w", o.Name, err)
	}
	rs := st.Rollouts
	if o.Service != "" {
		rs = slices.DeleteFunc(slices.Clone(rs), func(r application.RolloutStatus) bool { return r.Service != o.Service })
		if len(rs) == 0 {
			return fmt.Errorf("rollout status %s: no rollout of service %q", o.Name, o.Service)
		}
	}
	if o.Output != outputTable {
		return printObject(w, o.Output, rs)
	}
	if len(rs) == 0 {
		_, err := fmt.Fprintf(w, "%s has no rollout\n", o.Name)
		return err
	}
	return printRollouts(w, rs)
}

// printRollouts writes rollouts as a table, one row per service.
func printRollouts(w io.Writer, rs []application.RolloutStatus) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ROLLOUT\tSTRATEGY\tPHASE\tSTEP\tWEIGHT\tREPLICAS\tNEXT CHECK\tREASON")
	for _, r := range rs {
		phase := r.Phase
		if r.Paused {
			phase += " (paused)"
		}
		if r.Error != "" {
			phase, r.Reason = "Error", r.Error
		}
		next := "-"
		if !r.NextCheck.IsZero() {
			next = r.NextCheck.Local().Format(time.TimeOnly)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d%%\t%d\t%s\t%s\n", r.Service, r.Strategy, phase, strconv.Itoa(r.Step), r.Weight, r.Replicas, next, r.Reason)
	}
	return tw.Flush()
}
