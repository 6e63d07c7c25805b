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
	"github.com/flotilla-gitops/flotilla/rollout"
)

// appRolloutOptions are the arguments of `flotilla app rollout`.
type appRolloutOptions struct {
	*apiOptions
	Command string // status or one of api.RolloutCommands
	Name    string
	Service string // empty: every rollout (status) or the only one
	// Wait is how long a command waits for the pass that deploys it;
	// 0 returns once the controller has accepted it.
	Wait time.Duration
}

func newAppRolloutCmd(parent *apiOptions) *cobra.Command {
	o := appRolloutOptions{apiOptions: parent}
	verbs := append([]string{"status"}, api.RolloutCommands...)
	cmd := &cobra.Command{
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
  retry    start an aborted rollout again from its first step

A command waiting for its pass shows as PENDING in status. It is kept in the
controller's memory only, so a controller that restarts (or a leader that
changes) before a pass takes it forgets it. With --wait, the command returns
once a pass has deployed it and the rollout is as asked (aborted, promoting or
complete, paused, not paused, started again), printing the rollout; it fails
when the command is still pending at the deadline, and when it is no longer
pending but the rollout is not as asked: it was forgotten, or the rollout's
phase ignores it (an abort once promoting, a pause once complete).`,
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
	cmd.Flags().DurationVar(&o.Wait, "wait", 0, "wait up to this long for the pass that deploys the command, then show the rollout (0: return once accepted)")
	return cmd
}

func runAppRollout(ctx context.Context, c *client.Client, o appRolloutOptions, w io.Writer) error {
	if o.Command != "status" {
		sent := time.Now()
		r, err := c.RolloutCommand(ctx, o.Name, o.Command, o.Service)
		if err != nil {
			return fmt.Errorf("rollout %s %s: %w", o.Command, o.Name, err)
		}
		if o.Wait > 0 {
			return waitRolloutCommand(ctx, c, o, sent, w)
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

// waitRolloutCommand polls the application until a pass that began after
// the command was sent has run with the command no longer pending, then
// shows the rollout, or fails when the rollout is not as the command asks.
// No longer pending is not enough: a controller that restarted, or a new
// leader, never had the command, and its first pass leaves the rollout as
// it was. The command's own clock is compared with the controller's, so a
// skew between them only makes it wait one pass longer.
func waitRolloutCommand(ctx context.Context, c *client.Client, o appRolloutOptions, sent time.Time, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.Application(ctx, o.Name)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("rollout %s %s: wait: %w", o.Command, o.Name, err)
		}
		if err == nil {
			rs := slices.DeleteFunc(slices.Clone(st.Rollouts), func(r application.RolloutStatus) bool {
				return o.Service != "" && r.Service != o.Service
			})
			pending := slices.ContainsFunc(rs, func(r application.RolloutStatus) bool { return r.Pending != "" })
			if !pending && st.LastPass.After(sent) {
				// The API took a command without a service only for an
				// application with one rollout: that one.
				switch {
				case len(rs) == 0:
					return fmt.Errorf("rollout %s %s: the command is no longer pending, and the rollout it was for is gone; check `flotilla app rollout status %s`", o.Command, o.Name, o.Name)
				case len(rs) > 1:
					return fmt.Errorf("rollout %s %s: the command is no longer pending, and the application has %d rollouts now; name the service to see whether it did what was asked", o.Command, o.Name, len(rs))
				}
				if r := rs[0]; !rolloutAsAsked(o.Command, r) {
					return fmt.Errorf("rollout %s %s: the command is no longer pending, but the rollout of %s is not %s (%s): either the controller restarted, or its leader changed, before a pass took the command (it is kept in memory only), or the rollout ignores %s in this phase; check `flotilla app rollout status %s` and send the command again if it still applies",
						o.Command, o.Name, r.Service, askedState(o.Command), describeRollout(r), o.Command, o.Name)
				}
				if o.Output != outputTable {
					return printObject(w, o.Output, rs)
				}
				return printRollouts(w, rs)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rollout %s %s: no pass deployed it within %s; `flotilla app rollout status %s` shows it PENDING while the controller still holds it", o.Command, o.Name, o.Wait, o.Name)
		case <-tick.C:
		}
	}
}

// rolloutAsAsked reports whether a rollout is in the state command leads
// to. It judges the state, not a change, so a command that found the
// rollout there already (a pause of a paused rollout) counts as done.
func rolloutAsAsked(command string, r application.RolloutStatus) bool {
	if r.Error != "" {
		return false
	}
	phase := rollout.Phase(r.Phase)
	switch rollout.Command(command) {
	case rollout.CommandAbort:
		return phase == rollout.Aborted
	case rollout.CommandPromote:
		return phase == rollout.Promoting || phase == rollout.Completed
	case rollout.CommandPause:
		return r.Paused
	case rollout.CommandResume:
		return !r.Paused
	case rollout.CommandRetry:
		return phase != "" && phase != rollout.Aborted
	case rollout.NoCommand:
	}
	return false
}

// askedState names the state rolloutAsAsked looks for, for its error.
func askedState(command string) string {
	switch rollout.Command(command) {
	case rollout.CommandAbort:
		return "aborted"
	case rollout.CommandPromote:
		return "promoting or complete"
	case rollout.CommandPause:
		return "paused"
	case rollout.CommandResume:
		return "unpaused"
	case rollout.CommandRetry:
		return "started again"
	case rollout.NoCommand:
	}
	return "changed"
}

// describeRollout is a rollout's state in a few words, for an error.
func describeRollout(r application.RolloutStatus) string {
	phase := r.Phase
	if phase == "" {
		phase = "none"
	}
	d := fmt.Sprintf("phase %s, step %d, weight %d%%", phase, r.Step, r.Weight)
	if r.Paused {
		d += ", paused"
	}
	if r.Error != "" {
		return d + ": " + oneLine(termSafe(r.Error), 120)
	}
	if r.Reason != "" {
		d += ": " + oneLine(termSafe(r.Reason), 120)
	}
	return d
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
		if r.Pending != "" {
			r.Reason = "PENDING " + r.Pending + "; " + r.Reason
		}
		next := "-"
		if !r.NextCheck.IsZero() {
			next = r.NextCheck.Local().Format(time.TimeOnly)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d%%\t%d\t%s\t%s\n", r.Service, r.Strategy, phase, strconv.Itoa(r.Step), r.Weight, r.Replicas, next, r.Reason)
	}
	return tw.Flush()
}
