package chartengine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// The review's inputs (H5) and the extremes: every call either makes the
// exact list or refuses, at once, with no overflowed bound passing.
func TestListBuildersCountWithoutOverflow(t *testing.T) {
	const lo, hi = math.MinInt64, math.MaxInt64
	for _, c := range []struct {
		start, stop, step int
		want              []int // nil: refused
	}{
		{-5000000000000000000, 5000000000000000000, 1, nil},
		{lo, hi, 1, nil},
		{hi, lo, -1, nil},
		{lo, hi, hi, []int{lo, -1, hi - 1}},
		{hi, lo, lo, []int{hi, -1}},
		{hi - 1, hi, 2, []int{hi - 1}}, // sprig's loop wraps past MaxInt here
		{lo + 1, lo, -2, []int{lo + 1}},
		{0, 10, 0, []int{}},
		{10, 0, 0, []int{}},
		{0, 10, -1, []int{}},
		{10, 0, 1, []int{}},
		{0, 10, 3, []int{0, 3, 6, 9}},
		{10, 0, -4, []int{10, 6, 2}},
		{0, maxListLength, 1, nil},
		{0, maxListLength + 1, 1, nil},
		{0, 2 * maxListLength, 2, nil},
	} {
		got, err := untilStep(c.start, c.stop, c.step)
		if c.want == nil {
			if err == nil && len(got) > maxListLength {
				t.Errorf("untilStep %d %d %d: %d elements", c.start, c.stop, c.step, len(got))
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("untilStep %d %d %d = %v, %v; want %v", c.start, c.stop, c.step, got, err, c.want)
		}
	}
	if _, err := untilStep(0, maxListLength+1, 1); err == nil {
		t.Error("untilStep past the bound was made")
	}
	for _, n := range []int{lo, hi, -maxListLength - 1, maxListLength + 1} {
		if _, err := until(n); err == nil {
			t.Errorf("until %d was made", n)
		}
	}
	for _, p := range [][]int{{lo, hi - 1}, {lo, hi}, {hi, lo}, {hi}, {lo}, {lo, 1, hi}, {hi, -1, lo}, {-maxListLength, maxListLength}} {
		if s, err := seq(p...); err == nil {
			t.Errorf("seq %v was made (%d bytes)", p, len(s))
		}
	}
	for _, p := range [][]int{{hi - 1, hi}, {lo, lo + 2}, {hi, -1, hi - 2}, {lo, hi, lo}, {hi, hi}, {hi, hi - 1}} {
		s, err := seq(p...)
		if err != nil || len(strings.Fields(s)) > 3 {
			t.Errorf("seq %v = %q, %v", p, s, err)
		}
	}
}

// Where sprig's own functions are safe (small ranges) ours agree with them.
func TestListBuildersAgreeWithSprig(t *testing.T) {
	fm := sprig.TxtFuncMap()
	sUntil, sStep, sSeq := fm["until"].(func(int) []int), fm["untilStep"].(func(int, int, int) []int), fm["seq"].(func(...int) string)
	for a := -6; a <= 6; a++ {
		if got, _ := until(a); !slices.Equal(got, sUntil(a)) {
			t.Errorf("until %d = %v, sprig %v", a, got, sUntil(a))
		}
		if got, _ := seq(a); got != sSeq(a) {
			t.Errorf("seq %d = %q, sprig %q", a, got, sSeq(a))
		}
		for b := -6; b <= 6; b++ {
			if got, _ := seq(a, b); got != sSeq(a, b) {
				t.Errorf("seq %d %d = %q, sprig %q", a, b, got, sSeq(a, b))
			}
			for s := -3; s <= 3; s++ {
				if got, _ := untilStep(a, b, s); !slices.Equal(got, sStep(a, b, s)) {
					t.Errorf("untilStep %d %d %d = %v, sprig %v", a, b, s, got, sStep(a, b, s))
				}
				if got, _ := seq(a, s, b); got != sSeq(a, s, b) {
					t.Errorf("seq %d %d %d = %q, sprig %q", a, s, b, got, sSeq(a, s, b))
				}
			}
		}
	}
}

// hostileTemplates each build far more than the budget, or loop for
// years, and must be refused in the chart, file and line they are in.
var hostileTemplates = map[string]string{
	"untilStep overflow":  `{{ range untilStep -5000000000000000000 5000000000000000000 1 }}{{ end }}`,
	"seq overflow":        `{{ seq -9223372036854775808 9223372036854775806 }}`,
	"until negative":      `{{ range until -9223372036854775808 }}{{ end }}`,
	"cat doubling":        `{{ $s := "xxxxxxxx" }}{{ range until 40 }}{{ $s = cat $s $s }}{{ end }}`,
	"printf doubling":     `{{ $s := "xxxxxxxx" }}{{ range until 40 }}{{ $s = printf "%s%s" $s $s }}{{ end }}`,
	"replace doubling":    `{{ $s := "xxxxxxxx" }}{{ range until 40 }}{{ $s = replace "x" "xx" $s }}{{ end }}`,
	"join doubling":       `{{ $s := "xxxxxxxx" }}{{ range until 40 }}{{ $s = join $s (list 1 2 3) }}{{ end }}`,
	"repeat doubling":     `{{ $s := "xxxxxxxx" }}{{ range until 40 }}{{ $s = repeat 2 $s }}{{ end }}`,
	"printf width":        `{{ $s := "" }}{{ range until 100 }}{{ $s = printf "%999999d%999999d%999999d" 1 2 3 }}{{ end }}`,
	"printf star":         `{{ printf "%*d" 900000000 1 }}`,
	"indent":              `{{ $s := repeat 100000 "\n" }}{{ indent 100000 $s }}`,
	"regex expand":        `{{ $s := repeat 10000 "ab" }}{{ regexReplaceAll "(a)" $s (repeat 50000 "$1") }}`,
	"wrapWith":            `{{ wrapWith 1 (repeat 100000 "w") (repeat 100000 "s") }}`,
	"list doubling":       `{{ $l := list 1 }}{{ range until 64 }}{{ $l = list $l $l }}{{ end }}{{ toJson $l }}`,
	"append then join":    `{{ $s := repeat 1000000 "x" }}{{ $l := list }}{{ range until 100000 }}{{ $l = append $l $s }}{{ end }}{{ join "" $l }}`,
	"dict doubling":       `{{ $d := dict }}{{ range until 64 }}{{ $d = dict "a" $d "b" $d }}{{ end }}{{ toYaml $d }}`,
	"concat doubling":     `{{ $l := list 1 }}{{ range until 40 }}{{ $l = concat $l $l }}{{ end }}`,
	"triple nested range": `{{ range until 100000 }}{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}{{ end }}`,
	"include doubling":    `{{ define "d" }}{{ . }}{{ . }}{{ end }}{{ $s := "xxxxxxxx" }}{{ range until 40 }}{{ $s = include "d" $s }}{{ end }}`,
	"tpl doubling":        `{{ $s := "xxxxxxxx" }}{{ range until 40 }}{{ $s = tpl "{{ . }}{{ . }}" $s }}{{ end }}`,
}

func TestTemplatesCannotBuildPastTheRenderBudget(t *testing.T) {
	for name, tmpl := range hostileTemplates {
		t.Run(name, func(t *testing.T) {
			root := copyExample(t, map[string]string{"chart/templates/worker.yaml": "services:\n  worker:\n    image: x\n" + tmpl + "\n"})
			err := mustFail(render(t, root, Dir{}))
			fe := wantFault(t, err, "chart/templates/worker.yaml", "chart shop")
			if fe.Line != 4 {
				t.Errorf("line %d: %v", fe.Line, err)
			}
			// The size limit is what stops these on an idle machine; under
			// -race on a loaded one the clock can come first (CI saw
			// "replace doubling" reach 20 s). Either is the budget's refusal.
			msg := err.Error()
			sized := strings.Contains(msg, fmt.Sprintf("%d MiB", maxBuilt>>20)) || strings.Contains(msg, "elements is more than") || strings.Contains(msg, "larger than")
			timed := strings.Contains(msg, fmt.Sprintf("render budget: the render ran longer than its limit of %s", maxRenderTime))
			if !sized && !timed {
				t.Errorf("error does not name the limit: %v", err)
			}
		})
	}
}

// A loop that builds little but never ends is stopped by the clock,
// whether it calls functions or only writes.
func TestTemplatesCannotRunPastTheRenderDeadline(t *testing.T) {
	saved := maxRenderTime
	maxRenderTime = 200 * time.Millisecond
	t.Cleanup(func() { maxRenderTime = saved })
	for name, tmpl := range map[string]string{
		"calls":  `{{ $l := until 100000 }}{{ range $l }}{{ range $l }}{{ $_ := add1 1 }}{{ end }}{{ end }}`,
		"writes": `{{ $l := until 100000 }}{{ range $l }}{{ range $l }}{{ "" }}{{ end }}{{ end }}`,
	} {
		t.Run(name, func(t *testing.T) {
			root := copyExample(t, map[string]string{"chart/templates/worker.yaml": "services:\n  worker:\n    image: x\n" + tmpl + "\n"})
			start := time.Now()
			err := mustFail(render(t, root, Dir{}))
			wantFault(t, err, "chart/templates/worker.yaml", "chart shop", "ran longer than its limit of 200ms")
			if !errors.Is(err, ErrBudget) && !strings.Contains(err.Error(), ErrBudget.Error()) {
				t.Errorf("not a budget error: %v", err)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

// valueSize counts a value shared twice twice, and stops at its limit.
func TestValueSizeCountsSharedValuesAndStops(t *testing.T) {
	s := strings.Repeat("x", 1000)
	l := []any{s, s}
	if n := valueSize(l, math.MaxInt64); n < 2000 {
		t.Errorf("size %d", n)
	}
	var deep any = 1
	for range 200 {
		deep = []any{deep, deep}
	}
	start := time.Now()
	if n := valueSize(deep, 1<<20); n <= 1<<20 {
		t.Errorf("size %d", n)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s", d)
	}
}
