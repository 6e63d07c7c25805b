package daemon

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/flotilla-gitops/flotilla/reconcile"
)

// countByKind sums "kind name" entries: "3 resource(s): 2 service, 1 config".
func countByKind(items []string) string {
	n := map[string]int{}
	var order []string
	for _, it := range items {
		kind, _, _ := strings.Cut(it, " ")
		if n[kind] == 0 {
			order = append(order, kind)
		}
		n[kind]++
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	out := fmt.Sprintf("%d resource(s)", len(items))
	if len(parts) > 0 {
		out += ": " + strings.Join(parts, ", ")
	}
	return out
}

// printResult writes one line per application for --once.
func printResult(w io.Writer, app string, res reconcile.Result, err error) {
	s := res.Status
	if err != nil {
		fmt.Fprintf(w, "%s: FAILED: %v\n", app, err)
		return
	}
	line := fmt.Sprintf("%s: %s, sync %s, health %s", app, res.Action, s.Sync, s.Health)
	if res.Deployed != nil {
		d := res.Deployed
		line += fmt.Sprintf(", revision %d (created %d, updated %d, unchanged %d, %d writes)",
			res.Revision, len(d.Created), len(d.Updated), len(d.Unchanged), d.Writes)
	}
	if s.HealthMessage != "" {
		line += ": " + s.HealthMessage
	}
	fmt.Fprintln(w, line)
}

// printOrphan writes one line per stack of a removed application. The
// counts are of what the sweep found on the swarm, by kind: a record that
// declared more than is left (a `docker stack rm` since) counts only what
// is left, and a stack with nothing left says so.
func printOrphan(w io.Writer, o reconcile.Orphan) {
	switch {
	case o.Error != "":
		fmt.Fprintf(w, "stack %s (of removed %s): FAILED: %s\n", o.Stack, o.Owner, o.Error)
	case o.Sweep.DryRun && len(o.Sweep.Pending) == 0:
		fmt.Fprintf(w, "stack %s (of removed %s): nothing left on the swarm that --prune would remove\n", o.Stack, o.Owner)
	case o.Sweep.DryRun:
		fmt.Fprintf(w, "stack %s (of removed %s): kept; --prune would remove %s\n", o.Stack, o.Owner, countByKind(o.Sweep.Pending))
	default:
		fmt.Fprintf(w, "stack %s (of removed %s): removed %s\n", o.Stack, o.Owner, countByKind(o.Sweep.Removed))
	}
}

// printProblems writes every problem of a joined error on its own line.
func printProblems(w io.Writer, err error) {
	var multi interface{ Unwrap() []error }
	if errors.As(err, &multi) {
		for _, e := range multi.Unwrap() {
			fmt.Fprintln(w, e)
		}
		return
	}
	fmt.Fprintln(w, err)
}
