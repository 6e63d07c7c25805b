package health

import (
	"fmt"
	"sort"

	"github.com/flotilla-gitops/flotilla/application"
)

// Worst rolls parts up into one Result: the worst Health of them
// (application.Worst's order), the summed counts, and the message of the
// first part with that Health, prefixed by the counts. No parts is Healthy:
// nothing is declared, so nothing is wrong.
func Worst(parts ...Result) Result {
	names := make([]string, len(parts))
	return rollup(names, parts)
}

// Stack rolls named parts up: the services of a stack by service name, or
// the stacks of an application by stack name. It is Worst with the worst
// part's name in front of its reason, and ties broken by name so the message
// does not change from one pass to the next.
func Stack(results map[string]Result) Result {
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]Result, len(names))
	for i, n := range names {
		parts[i] = results[n]
	}
	return rollup(names, parts)
}

// StackSorted is Stack for parts already in the order of their names
// (sorted, no name twice), so a caller that has sorted them for its own use
// does not sort a thousand names a second time.
func StackSorted(names []string, parts []Result) Result {
	return rollup(names, parts)
}

func rollup(names []string, parts []Result) Result {
	out := Result{Health: application.Healthy}
	worst := -1
	for i, p := range parts {
		out.Running += p.Running
		out.Desired += p.Desired
		out.Health = application.Worst(out.Health, p.Health)
		if worst < 0 || application.Worst(parts[worst].Health, p.Health) != parts[worst].Health {
			worst = i
		}
	}
	out.Message = fmt.Sprintf("%d/%d running", out.Running, out.Desired)
	if out.Health == application.Healthy {
		return out
	}
	reason := parts[worst].Message
	if names[worst] != "" {
		reason = names[worst] + ": " + reason
	}
	if reason != "" {
		out.Message += "; " + reason
	}
	return out
}
