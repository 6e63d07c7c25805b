//go:build benchheap

// This file is only in a binary built with -tags benchheap, for bench/scale
// to find what holds the memory at a run's peak: with
// FLOTILLA_BENCH_HEAPPROFILE=PREFIX set, the heap profile is written to
// PREFIX.PID each time the heap in use reaches a new high, so the file left
// at exit is the profile nearest that process's peak.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"
)

func init() {
	path := os.Getenv("FLOTILLA_BENCH_HEAPPROFILE")
	if path == "" {
		return
	}
	path += "." + strconv.Itoa(os.Getpid())
	go func() {
		var high uint64
		var ms runtime.MemStats
		for range time.Tick(500 * time.Millisecond) {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse <= high+high/20 { // 5% above the last one written
				continue
			}
			high = ms.HeapInuse
			f, err := os.Create(path + ".tmp")
			if err != nil {
				continue
			}
			if pprof.WriteHeapProfile(f) == nil && f.Close() == nil {
				_ = os.Rename(path+".tmp", path)
			}
			// Beside it, where the memory the process holds goes.
			_ = os.WriteFile(path+".memstats", fmt.Appendf(nil,
				"heap_inuse %d\nheap_idle %d\nheap_released %d\nheap_sys %d\nstack_inuse %d\nsys %d\nnext_gc %d\nnum_gc %d\ngoroutines %d\n",
				ms.HeapInuse, ms.HeapIdle, ms.HeapReleased, ms.HeapSys, ms.StackInuse, ms.Sys, ms.NextGC, ms.NumGC, runtime.NumGoroutine()), 0o644)
		}
	}()
}
