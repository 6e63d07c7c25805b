package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// pair is one step at one size, by both tools.
type pair struct {
	workload, step   string
	size             int
	docker, flotilla *row
}

func pairs(rows []row) []pair {
	var out []pair
	find := func(r row) *pair {
		for i := range out {
			p := &out[i]
			if p.workload == r.Workload && p.step == r.Step && p.size == r.Size {
				return p
			}
		}
		out = append(out, pair{workload: r.Workload, step: r.Step, size: r.Size})
		return &out[len(out)-1]
	}
	for i := range rows {
		r := &rows[i]
		p := find(*r)
		if r.Tool == "docker" {
			p.docker = r
		} else {
			p.flotilla = r
		}
	}
	return out
}

func ratio(f, d float64) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", f/d)
}

func formatReport(rows []row, st *steadyResult, wh *webhookResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-12s %5s %-19s | %8s %8s %6s | %8s %8s %6s | %8s %8s | %7s %7s | %7s %7s\n",
		"workload", "size", "step", "docker s", "flot s", "ratio", "dock cpu", "flot cpu", "ratio", "dock req", "flot req", "dock wr", "flot wr", "dock MB", "flot MB")
	b.WriteString(strings.Repeat("-", 150) + "\n")
	for _, p := range pairs(rows) {
		d, f := p.docker, p.flotilla
		if d == nil {
			d = &row{}
		}
		if f == nil {
			f = &row{}
		}
		fmt.Fprintf(&b, "%-12s %5d %-19s | %8.3f %8.3f %6s | %8.3f %8.3f %6s | %8d %8d | %7d %7d | %7.1f %7.1f\n",
			p.workload, p.size, p.step, d.Seconds, f.Seconds, ratio(f.Seconds, d.Seconds), d.CPU, f.CPU, ratio(f.CPU, d.CPU),
			d.Requests, f.Requests, d.Writes, f.Writes, float64(d.RSSKB)/1024, float64(f.RSSKB)/1024)
	}
	b.WriteString("size: services in the one stack, or applications of the many-applications workload.\n")
	b.WriteString("s = median wall time; cpu = median user+system time of the process(es); ratio = flotilla / docker (below 1: flotilla costs less);\n")
	b.WriteString("req = Docker API requests;\n")
	b.WriteString("wr = requests that may write (not GET/HEAD); MB = peak RSS of the process (the largest of a docker loop).\n")

	if st != nil && len(st.Samples) > 0 {
		var after []sample
		for _, s := range st.Samples {
			if s.At >= st.Warmup {
				after = append(after, s)
			}
		}
		if len(after) == 0 {
			after = st.Samples
		}
		first, last := after[0], after[len(after)-1]
		span := func(get func(sample) float64) (lo, hi float64) {
			lo, hi = get(after[0]), get(after[0])
			for _, s := range after {
				lo, hi = min(lo, get(s)), max(hi, get(s))
			}
			return
		}
		gl, gh := span(func(s sample) float64 { return s.Goroutines })
		hl, hh := span(func(s sample) float64 { return s.HeapMB })
		rl, rh := span(func(s sample) float64 { return s.RSSMB })
		fmt.Fprintf(&b, "\nsteady run: %d applications, every one on a 10s interval, %s (first %s not counted), %d passes\n",
			st.Apps, st.Duration, st.Warmup, st.Passes)
		fmt.Fprintf(&b, "  goroutines  first %.0f  last %.0f  min %.0f  max %.0f\n", first.Goroutines, last.Goroutines, gl, gh)
		fmt.Fprintf(&b, "  heap in use first %.1f  last %.1f  min %.1f  max %.1f MB\n", first.HeapMB, last.HeapMB, hl, hh)
		fmt.Fprintf(&b, "  RSS         first %.1f  last %.1f  min %.1f  max %.1f MB; peak (VmHWM) %.1f MB\n", first.RSSMB, last.RSSMB, rl, rh, st.PeakMB)
		if st.Passes > 0 {
			fmt.Fprintf(&b, "  Docker requests %d (%.2f per pass), writes %d, %.1f MB read\n", st.Requests, float64(st.Requests)/float64(st.Passes), st.Writes, float64(st.Bytes)/(1<<20))
			fmt.Fprintf(&b, "  controller CPU %.1f s (%.2f ms per pass)\n", st.CPU, 1000*st.CPU/float64(st.Passes))
		}
		b.WriteString(windows(after))
	}
	if wh != nil {
		fmt.Fprintf(&b, "\ncommit to applied through a webhook, %d commits, one service of one replica (median, min-max):\n", wh.Commits)
		fmt.Fprintf(&b, "  controller: webhook POST to the service update answered  %s\n", spread(wh.Controller))
		fmt.Fprintf(&b, "  webhook POST to the new spec read back from the swarm     %s\n", spread(wh.Visible))
		fmt.Fprintf(&b, "  swarm: update answered to a task of the new spec running %s\n", spread(wh.Swarm))
		fmt.Fprintf(&b, "  push done to the new task running                        %s\n", spread(wh.Total))
		fmt.Fprintf(&b, "  controller peak RSS %.1f MB\n", wh.PeakMB)
	}
	return b.String()
}

func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("%s (%s-%s)", r(s[len(s)/2]), r(s[0]), r(s[len(s)-1]))
}

// windows compares the means of the first and the last stretch of a steady
// run (ten minutes each, or a third of the run when it is shorter): a leak
// shows as a last window above the first however noisy single samples are.
func windows(after []sample) string {
	if len(after) < 6 {
		return ""
	}
	run := after[len(after)-1].At - after[0].At
	w := min(10*time.Minute, run/3)
	var first, last []sample
	for _, s := range after {
		if s.At <= after[0].At+w {
			first = append(first, s)
		}
		if s.At >= after[len(after)-1].At-w {
			last = append(last, s)
		}
	}
	mean := func(ss []sample, get func(sample) float64) float64 {
		t := 0.0
		for _, s := range ss {
			t += get(s)
		}
		return t / float64(len(ss))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  means, first %s vs last %s (%d and %d samples):\n", w.Round(time.Second), w.Round(time.Second), len(first), len(last))
	for _, m := range []struct {
		name string
		get  func(sample) float64
	}{
		{"goroutines    ", func(s sample) float64 { return s.Goroutines }},
		{"heap in use MB", func(s sample) float64 { return s.HeapMB }},
		{"RSS MB        ", func(s sample) float64 { return s.RSSMB }},
	} {
		f, l := mean(first, m.get), mean(last, m.get)
		fmt.Fprintf(&b, "    %s %7.1f -> %7.1f (%+.1f%%)\n", m.name, f, l, 100*(l-f)/f)
	}
	return b.String()
}
