package daemon

import (
	"context"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

func TestSoftMemoryLimit_flagTakesAutoOffOrASize(t *testing.T) {
	for in, want := range map[string]MemoryLimit{
		"auto":   {Auto: true},
		"off":    {},
		"0":      {},
		"96MiB":  {Bytes: 96 << 20},
		"1GiB":   {Bytes: 1 << 30},
		"500000": {Bytes: 500000},
		"64KiB":  {Bytes: 64 << 10},
	} {
		var m MemoryLimit
		if err := m.Set(in); err != nil || m != want {
			t.Errorf("Set(%q) = %+v, %v; want %+v", in, m, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-5MiB", "1.5GiB", "10MB", "9999999TiB"} {
		var m MemoryLimit
		if err := m.Set(bad); err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("Set(%q) = %+v, %v; want an error naming the value", bad, m, err)
		}
	}
}

func TestSoftMemoryLimit_autoIsHalfAgainTheLiveHeapAboveAFloor(t *testing.T) {
	for live, want := range map[uint64]int64{
		0:         autoMemoryFloor,
		20 << 20:  autoMemoryFloor,
		64 << 20:  96 << 20,
		200 << 20: 300 << 20,
	} {
		if got := autoLimit(live); got != want {
			t.Errorf("autoLimit(%d MiB) = %d MiB, want %d MiB", live>>20, got>>20, want>>20)
		}
	}
	if got := autoLimit(math.MaxUint64); got <= 0 {
		t.Errorf("autoLimit(max) = %d, want a positive limit", got)
	}
}

// The operator's GOMEMLIMIT wins over the flag; without it the flag's size
// is the runtime's limit.
func TestSoftMemoryLimit_isTheRuntimesUnlessGOMEMLIMITIsSet(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()

	t.Setenv("GOMEMLIMIT", "")
	applyMemoryLimit(ctx, MemoryLimit{Bytes: 123 << 20}, quiet)()
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Errorf("limit with --soft-memory-limit 123MiB = %d", got)
	}
	stop := applyMemoryLimit(ctx, MemoryLimit{Auto: true}, quiet)
	if got := debug.SetMemoryLimit(-1); got < autoMemoryFloor {
		t.Errorf("limit with auto = %d, under the floor", got)
	}
	stop()

	debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "1GiB")
	applyMemoryLimit(ctx, MemoryLimit{Bytes: 123 << 20}, quiet)()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit with GOMEMLIMIT set = %d, want it left at %d", got, before)
	}
}
