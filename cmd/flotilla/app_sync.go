package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/client"
	"github.com/flotilla-gitops/flotilla/events"
)

// appSyncOptions are the flags of `flotilla app sync`.
type appSyncOptions struct {
	*apiOptions
	Name string
	waitOptions
	Prune    bool
	DryRun   bool
	Revision string
}

// waitOptions are the flags of commands that can wait for a pass.
type waitOptions struct {
	Wait    bool
	Timeout time.Duration
}

func (o *waitOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "wait for the pass to finish; exit 1 if it failed or did not finish in time")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 5*time.Minute, "with --wait, how long to wait")
}

// drainGrace bounds how long the CLI waits, after the answer, for the
// pass's last events to arrive.
const drainGrace = time.Second

// waitMargin is how much longer the CLI waits than it asked the server to,
// so the server's own "still running" answer arrives first.
const waitMargin = 30 * time.Second

func newAppSyncCmd(parent *apiOptions) *cobra.Command {
	o := appSyncOptions{apiOptions: parent}
	cmd := &cobra.Command{
		Use:   "sync NAME",
		Short: "Apply what the repository declares now, even for a manual application",
		Long: `Sync asks the controller to run a pass for NAME now and apply it, manual
applications included. Without --wait it returns once the request is queued.

With --wait it follows the pass: on a terminal it shows each service's tasks
(running/desired) and update state live; otherwise it prints one line per
event. It exits 0 when the pass succeeded, 1 when it failed or did not finish
within --timeout (the pass goes on in the controller).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAppNames(parent),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if o.Timeout <= 0 {
				return usageError{errors.New("--timeout must be positive")}
			}
			return runAPI(cmd, o.apiOptions, o.Timeout+waitMargin, func(ctx context.Context, c *client.Client) error {
				return runAppSync(ctx, c, o, cmd.OutOrStdout(), isTerminal(cmd.OutOrStdout()))
			})
		},
	}
	o.waitOptions.addFlags(cmd)
	f := cmd.Flags()
	f.BoolVar(&o.Prune, "prune", false, "also remove what the repository no longer declares (only what this application provably created)")
	f.BoolVar(&o.DryRun, "dry-run", false, "plan and print the writes and removals without writing to the swarm (waits for the plan)")
	f.StringVar(&o.Revision, "revision", "", "sync this commit instead of the tracked branch's head")
	return cmd
}

func runAppSync(ctx context.Context, c *client.Client, o appSyncOptions, w io.Writer, tty bool) error {
	body := api.SyncBody{Prune: o.Prune, DryRun: o.DryRun, Revision: o.Revision}
	verb := "sync"
	if o.DryRun {
		verb = "dry run"
		// A dry run's only product is its plan, which comes with the
		// pass's result: it always waits.
		o.Wait = true
	}
	return runOperation(ctx, c, apiOperation{
		app: o.Name, verb: verb, output: o.Output, wait: o.waitOptions, tty: tty, prune: o.Prune,
		call: func(ctx context.Context, wait client.Wait) (api.OperationResponse, error) {
			return c.Sync(ctx, o.Name, body, wait)
		},
	}, w)
}

// apiOperation is a sync or rollback as the CLI runs it.
type apiOperation struct {
	app, verb string
	output    string
	wait      waitOptions
	tty       bool
	prune     bool // the sync removes what a plan lists as pending removals
	call      func(context.Context, client.Wait) (api.OperationResponse, error)
}

// runOperation calls op, following its events while it waits, prints the
// outcome and returns errFailed when the pass failed or outlasted the wait.
func runOperation(ctx context.Context, c *client.Client, op apiOperation, w io.Writer) error {
	if !op.wait.Wait {
		r, err := op.call(ctx, client.Wait{})
		if err != nil {
			return fmt.Errorf("%s %s: %w", op.verb, op.app, err)
		}
		if op.output != outputTable {
			return printObject(w, op.output, r)
		}
		_, err = fmt.Fprintf(w, "%s: %s queued; `flotilla app get %s` shows the outcome\n", op.app, op.verb, op.app)
		return err
	}

	var evs <-chan events.Event
	evCtx, stopEvents := context.WithCancel(ctx)
	defer stopEvents()
	if op.output == outputTable {
		// Progress is a nicety: without the stream the wait still works.
		evs, _ = c.AppEvents(evCtx, op.app, 0)
	}
	type answer struct {
		r   api.OperationResponse
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := op.call(ctx, client.Wait{Wait: true, Timeout: op.wait.Timeout})
		done <- answer{r, err}
	}()

	p := &syncProgress{w: w, tty: op.tty, app: op.app}
	var a answer
	final := false // the pass's closing sync event was shown
	isFinal := func(e events.Event) bool { return e.Type == events.SyncSucceeded || e.Type == events.SyncFailed }
wait:
	for {
		select {
		case e, ok := <-evs:
			if !ok {
				evs = nil
				continue
			}
			p.event(e)
			final = isFinal(e)
		case a = <-done:
			break wait
		}
	}
	// The pass's own events are published before its result is delivered,
	// but may still be on their way: show them, up to the final sync event.
	grace := time.After(drainGrace)
drain:
	for evs != nil && !final {
		select {
		case e, ok := <-evs:
			if !ok {
				break drain
			}
			p.event(e)
			final = isFinal(e)
		case <-grace:
			break drain
		}
	}
	stopEvents()
	if a.err != nil {
		if errors.Is(a.err, context.DeadlineExceeded) {
			return fmt.Errorf("%s %s: no answer within %s; the pass may still be running, see `flotilla app get %s`", op.verb, op.app, op.wait.Timeout+waitMargin, op.app)
		}
		return fmt.Errorf("%s %s: %w", op.verb, op.app, a.err)
	}
	if op.output != outputTable {
		if err := printObject(w, op.output, a.r); err != nil {
			return err
		}
	} else {
		printOutcome(w, op.verb, a.r)
		if a.r.Plan != nil {
			printPlan(w, *a.r.Plan, op.prune)
		}
	}
	if a.r.Phase != api.Succeeded {
		return errFailed
	}
	return nil
}

// printOutcome writes the one-line result of a finished (or timed-out) wait.
func printOutcome(w io.Writer, verb string, r api.OperationResponse) {
	switch r.Phase {
	case api.Succeeded:
		line := fmt.Sprintf("%s: %s succeeded", r.App, verb)
		if r.Action != "" {
			line += " (" + r.Action + ")"
		}
		if r.Revision > 0 {
			line += fmt.Sprintf(", release %d", r.Revision)
		}
		if r.Status != nil {
			line += fmt.Sprintf("; sync %s, health %s", r.Status.Sync, r.Status.Health)
			if r.Status.HealthMessage != "" {
				line += ": " + r.Status.HealthMessage
			}
		}
		fmt.Fprintln(w, line)
	case api.Failed:
		fmt.Fprintf(w, "%s: %s FAILED: %s\n", r.App, verb, r.Error)
	default:
		msg := r.Message
		if msg == "" {
			msg = "not finished"
		}
		fmt.Fprintf(w, "%s: %s did not finish in time: %s\n", r.App, verb, msg)
	}
}

// printPlan writes a dry run's plan as a table: one row per field a write
// would change (one row for a service created or removed whole), then the
// objects a prune would remove, marked as left in place unless prune.
func printPlan(w io.Writer, d api.Diff, prune bool) {
	if len(d.Services) == 0 && len(d.PendingRemovals) == 0 {
		fmt.Fprintln(w, "plan: nothing to write or remove")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "CHANGE\tOBJECT\tFIELD\tLIVE\tDECLARED")
	for _, s := range d.Services {
		if len(s.Fields) == 0 {
			fmt.Fprintf(tw, "%s\tservice %s\t\t\t\n", s.Change, s.Name)
		}
		for _, f := range s.Fields {
			fmt.Fprintf(tw, "%s\tservice %s\t%s\t%s\t%s\n", s.Change, s.Name, f.Field, oneLine(f.Live, 40), oneLine(f.Desired, 40))
		}
	}
	remove := "remove"
	if !prune {
		remove = "remove (with --prune)"
	}
	for _, r := range d.PendingRemovals {
		fmt.Fprintf(tw, "%s\t%s\t\t\t\n", remove, r)
	}
	_ = tw.Flush()
	for _, u := range d.Unavailable {
		fmt.Fprintf(w, "note: %s\n", u)
	}
}

// syncProgress shows a pass's events. On a terminal it keeps one line per
// service (tasks running/desired, update state) under a status line and
// redraws them in place; elsewhere it prints one plain line per event.
type syncProgress struct {
	w   io.Writer
	tty bool
	app string

	services map[string]serviceProgress
	order    []string
	phase    string
	drawn    int // lines drawn by the last redraw
}

type serviceProgress struct {
	running, desired int
	state, message   string
}

func (p *syncProgress) event(e events.Event) {
	if e.Type == events.Gap {
		return
	}
	if running, desired, state, ok := events.ProgressOf(e); ok {
		if p.services == nil {
			p.services = map[string]serviceProgress{}
		}
		if _, seen := p.services[e.Service]; !seen {
			p.order = append(p.order, e.Service)
			slices.Sort(p.order)
		}
		p.services[e.Service] = serviceProgress{running, desired, state, e.Message}
		if !p.tty {
			fmt.Fprintf(p.w, "%s %s/%s: %d/%d tasks%s\n", e.Time.Local().Format(time.TimeOnly),
				e.App, e.Service, running, desired, progressSuffix(state, e.Message))
			return
		}
	} else {
		line := describeEvent(e)
		if !p.tty {
			fmt.Fprintf(p.w, "%s %s\n", e.Time.Local().Format(time.TimeOnly), line)
			return
		}
		p.phase = line
	}
	p.redraw()
}

func (p *syncProgress) redraw() {
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn) // back to the top of the block
	}
	lines := 0
	put := func(s string) {
		b.WriteString("\x1b[2K" + s + "\n")
		lines++
	}
	if p.phase != "" {
		put(p.phase)
	}
	width := 0
	for _, n := range p.order {
		width = max(width, len(n))
	}
	for _, n := range p.order {
		s := p.services[n]
		mark := "…"
		if s.desired > 0 && s.running == s.desired && (s.state == "" || s.state == "completed") {
			mark = "✓"
		}
		put(fmt.Sprintf("  %s %-*s  %d/%d%s", mark, width, n, s.running, s.desired, progressSuffix(s.state, s.message)))
	}
	p.drawn = lines
	fmt.Fprint(p.w, b.String())
}

func progressSuffix(state, message string) string {
	s := ""
	if state != "" {
		s += "  " + state
	}
	if message != "" {
		s += "  " + oneLine(message, 60)
	}
	return s
}

// describeEvent renders a non-progress event in one line.
func describeEvent(e events.Event) string {
	what := string(e.Type)
	switch e.Type {
	case events.SyncStarted:
		what = "sync started"
	case events.SyncSucceeded:
		what = "sync succeeded"
	case events.SyncFailed:
		what = "sync failed"
	case events.DriftDetected:
		what = "drift detected"
	case events.DriftCorrected:
		what = "drift corrected"
	case events.OutOfBandChange:
		what = "changed outside Flotilla"
	case events.HealthChanged:
		what = "health changed"
	case events.Pruned:
		what = "pruned"
	case events.HookRan:
		what = "hook"
	case events.RolledBack:
		what = "rolled back"
	case events.AuditRecorded:
		what = "audited"
	case events.RolloutStep:
		what = "rollout"
	case events.ImageCommitted:
		what = "image update committed"
	case events.ImageProposed:
		what = "image update proposed"
	case events.ImageHeld:
		what = "image update held back"
	case events.Lagged, events.Gap:
		what = "event stream interrupted"
	}
	subject := e.App
	if e.Service != "" {
		subject += "/" + e.Service
	}
	line := subject + ": " + what
	if e.Revision != "" {
		line += " at " + shortSHA(e.Revision)
	}
	if e.Message != "" {
		line += ": " + oneLine(e.Message, 100)
	}
	return line
}
