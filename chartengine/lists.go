package chartengine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The list builders a template gets. sprig's own until, untilStep and seq
// step an int until it passes the end, so a bound checked as (stop-start)/step
// can overflow and pass, and the loop itself can wrap past math.MaxInt and
// never stop. These count the elements in unsigned arithmetic before making
// any, refuse more than maxListLength, and compute each element from its
// index, so no intermediate value overflows.

// stepCount is how many of start, start+step, ... lie before stop
// (inclusive: up to and including stop), following sprig's direction
// rules: a step pointing away from stop, or zero, gives none.
func stepCount(start, stop, step int, inclusive bool) uint64 {
	var dist, size uint64
	switch {
	case step > 0 && (start < stop || inclusive && start == stop):
		dist, size = uint64(stop)-uint64(start), uint64(step)
	case step < 0 && start > stop:
		// -step overflows for math.MinInt; -(step+1)+1 does not.
		dist, size = uint64(start)-uint64(stop), uint64(-(step+1))+1
	default:
		return 0
	}
	if inclusive {
		// min: the whole int range holds 2^64 elements, one past uint64.
		return min(dist/size, math.MaxUint64-1) + 1
	}
	return (dist-1)/size + 1
}

// stepList makes the n elements start, start+step, ...; the arithmetic
// wraps the way int does, which is exact because every element lies
// between start and stop.
func stepList(name string, start, step int, n uint64) ([]int, error) {
	if n > maxListLength {
		return nil, fmt.Errorf("%s: %d elements is more than %d", name, n, maxListLength)
	}
	v := make([]int, n)
	for i := range v {
		v[i] = int(uint64(start) + uint64(i)*uint64(step))
	}
	return v, nil
}

// until is sprig's until: 0 up to n, or down to n when n is negative.
func until(n int) ([]int, error) {
	step := 1
	if n < 0 {
		step = -1
	}
	return stepList("until", 0, step, stepCount(0, n, step, false))
}

// untilStep is sprig's untilStep: start up to (not including) stop.
func untilStep(start, stop, step int) ([]int, error) {
	return stepList("untilStep", start, step, stepCount(start, stop, step, false))
}

// seq is sprig's seq, the Unix command: "seq END", "seq START END" or
// "seq START STEP END", inclusive, as one space-separated string.
func seq(params ...int) (string, error) {
	start, step, end := 1, 1, 0
	switch len(params) {
	case 1:
		end = params[0]
		if end < start {
			step = -1
		}
	case 2:
		start, end = params[0], params[1]
		if end < start {
			step = -1
		}
	case 3:
		start, step, end = params[0], params[1], params[2]
	default:
		return "", nil
	}
	v, err := stepList("seq", start, step, stepCount(start, end, step, true))
	if err != nil {
		return "", err
	}
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " "), nil
}
