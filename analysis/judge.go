// Package analysis produces the verdicts that gate a rollout's steps. The
// reconcile pass asks a Runner for each rollout's verdict just before
// rollout.Decide, and passes what it gets as Input.Verdict; Decide alone
// decides what a verdict does (advance, hold, abort).
//
// A verdict judges one interval of the current step's traffic. The Runner
// keeps, in memory, when each rollout's current interval began and what
// Traefik's metrics said then; once the interval is over it reads them
// again and judges the difference (Judge), and calls the webhook and runs
// the Prometheus query if the spec has them. That memory is lost when the
// controller restarts: the first interval after a restart starts afresh,
// which costs one interval and nothing else, since a rollout without a
// passing verdict only waits.
//
// A Prometheus query (analysis.prometheus) is evaluated once, at the end
// of each interval, by the server it names; it needs no start.
package analysis

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/router"
)

// Judgement is one check's result with what it measured, in the words a
// status or an abort reason shows.
type Judgement struct {
	Result rollout.Result
	// Metric and Values say what decided it, e.g. "error ratio" and
	// "0.31 > 0.05"; for an Inconclusive one, why nothing was proved.
	Metric, Values string
}

// Judge weighs what the new colour's backend did in one interval (canary)
// against the analysis's limits; stable is the stable backend's window
// over the same interval, quoted beside a failing figure so the reader
// sees whether the old version does any better. Too few requests prove
// nothing either way, and neither does a window that spans a Traefik
// restart or a counter that went back (it may undercount errors).
func Judge(a rollout.Analysis, canary, stable router.Window) Judgement {
	switch {
	case canary.Restarted:
		return Judgement{rollout.Inconclusive, "traefik", "Traefik restarted within the interval"}
	case canary.Reset > 0:
		return Judgement{rollout.Inconclusive, "traefik", fmt.Sprintf("%d counters went back within the interval", canary.Reset)}
	case canary.Requests < int64(a.MinRequests):
		return Judgement{rollout.Inconclusive, "requests", fmt.Sprintf("%d < %d", canary.Requests, a.MinRequests)}
	}
	if r := a.MaxErrorRatio; r != nil && canary.ErrorRatio > *r {
		limit := strconv.FormatFloat(*r, 'f', -1, 64)
		prec := 2
		if i := strings.IndexByte(limit, '.'); i >= 0 && len(limit)-i-1 > prec {
			prec = len(limit) - i - 1
		}
		v := fmt.Sprintf("%.*f > %s", prec, canary.ErrorRatio, limit)
		if stable.Requests > 0 {
			v += fmt.Sprintf(" (stable %.*f)", prec, stable.ErrorRatio)
		}
		return Judgement{rollout.Fail, "error ratio", v}
	}
	if a.MaxLatency > 0 && canary.MeanLatency > a.MaxLatency {
		v := shortDuration(canary.MeanLatency) + " > " + shortDuration(a.MaxLatency)
		if stable.Requests > 0 {
			v += " (stable " + shortDuration(stable.MeanLatency) + ")"
		}
		return Judgement{rollout.Fail, "mean latency", v}
	}
	return Judgement{Result: rollout.Pass}
}

// shortDuration drops digits no one reads in a latency.
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// combine is the verdict of several checks of one interval: any failure
// fails it, else anything unproven leaves it Inconclusive, else it passes.
// The Judgement returned is the one that decided.
func combine(js []Judgement) Judgement {
	var first Judgement
	for _, j := range js {
		if j.Result == rollout.Fail {
			return j
		}
		if j.Result == rollout.Inconclusive && first.Result == "" {
			first = j
		}
	}
	if first.Result != "" {
		return first
	}
	if len(js) == 0 {
		return Judgement{}
	}
	return Judgement{Result: rollout.Pass}
}
