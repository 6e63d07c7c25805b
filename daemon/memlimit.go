package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// The controller's soft memory limit. Go's collector lets the heap grow to
// twice what is live before it collects (GOGC=100), so a controller whose
// passes hold 45 MB ran at 115-155 MB of RSS at 1,000 applications of 5
// services. A soft limit makes the collector run before that; set at a
// fixed size it would make a controller whose live heap outgrows the size
// collect without pause (the runtime caps that at half the CPU), so "auto"
// follows the live heap: the limit is half as much again as what the last
// collection found live, and never under a floor below which the default
// pacing already keeps a small controller. See docs/performance.md for what
// it costs and saves.
const (
	autoMemoryFloor    = 64 << 20
	autoMemoryInterval = time.Second
)

// MemoryLimit is the parsed --soft-memory-limit: auto, off or a size. It
// is a flag value (pflag.Value) so the command line is parsed where the
// limit is understood.
type MemoryLimit struct {
	Auto  bool
	Bytes int64 // fixed limit; 0 with Auto false is off
}

func (m MemoryLimit) String() string {
	switch {
	case m.Auto:
		return "auto"
	case m.Bytes == 0:
		return "off"
	}
	return strconv.FormatInt(m.Bytes, 10)
}

func (m *MemoryLimit) Set(s string) error {
	switch strings.TrimSpace(s) {
	case "auto":
		*m = MemoryLimit{Auto: true}
		return nil
	case "off", "0":
		*m = MemoryLimit{}
		return nil
	}
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*m = MemoryLimit{Bytes: n}
	return nil
}

func (m MemoryLimit) Type() string { return "auto|off|size" }

// parseSize reads a size the way GOMEMLIMIT is written: a whole number of
// bytes with an optional B, KiB, MiB, GiB or TiB suffix.
func parseSize(in string) (int64, error) {
	s := strings.TrimSpace(in)
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	shift := uint(0)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = rest, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("%q is not auto, off or a size such as 96MiB or 1GiB", in)
	}
	return n << shift, nil
}

// applyMemoryLimit sets the soft limit m asks for, unless GOMEMLIMIT is set:
// the operator's setting of the runtime's own variable wins. With auto it
// keeps the limit in step with the live heap until stop is called or ctx
// ends; stop returns once it no longer changes the limit.
func applyMemoryLimit(ctx context.Context, m MemoryLimit, log *slog.Logger) (stop func()) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		if m.Auto || m.Bytes > 0 {
			log.Info("GOMEMLIMIT is set; --soft-memory-limit is not applied", "component", "controller", "GOMEMLIMIT", v)
		}
		return func() {}
	}
	switch {
	case m.Bytes > 0:
		debug.SetMemoryLimit(m.Bytes)
	case m.Auto:
		follow := func() { debug.SetMemoryLimit(autoLimit(liveHeap())) }
		follow()
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(autoMemoryInterval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					follow()
				}
			}
		}()
		return func() { cancel(); <-done }
	}
	return func() {}
}

// autoLimit is the soft limit for a live heap of live bytes.
func autoLimit(live uint64) int64 {
	l := int64(min(live, 1<<61))
	return max(autoMemoryFloor, l+l/2)
}

// liveHeap is the heap the last collection found live, in bytes.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
