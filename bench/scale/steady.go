package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// sample is one look at a running controller.
type sample struct {
	At         time.Duration // since the controller started
	Goroutines float64
	HeapMB     float64 // go_memstats_heap_inuse_bytes
	RSSMB      float64 // VmRSS
	ProcRSSMB  float64 // process_resident_memory_bytes, the controller's own view
	Passes     float64 // flotilla_reconcile_duration_seconds_count so far
	Requests   int     // Docker requests through the proxy so far (since the start)
	CPU        float64 // the controller's user+system seconds so far
}

type steadyResult struct {
	Apps     int
	Duration time.Duration
	Warmup   time.Duration
	Samples  []sample
	PeakMB   float64 // VmHWM at the end
	CPU      float64 // the controller's user+system seconds after the warm-up
	counts           // requests over the run, after the warm-up
	Passes   int     // passes the controller reported over the same span
}

// freePort asks the kernel for a free loopback port.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// controller is a long-running `flotilla controller` on a loopback port.
type controller struct {
	cmd  *exec.Cmd
	addr string
	log  *os.File
}

func (b *bench) startController(dir string, env ...string) (*controller, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.o.flotilla, "controller", "--controller-id", b.id, "--config", "apps.yaml", "--data", "cache",
		"--listen", addr, "--insecure-no-auth", "--log-level", "warn")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "DOCKER_HOST=unix://"+b.px.socket), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	return &controller{cmd: cmd, addr: addr, log: logf}, nil
}

func (c *controller) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
	c.log.Close()
}

// metrics reads the named gauges and counters (summed over labels) from
// the controller's /metrics.
func (c *controller) metrics(names ...string) (map[string]float64, error) {
	resp, err := http.Get("http://" + c.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, n := range names {
			if line == n || strings.HasPrefix(line, n+" ") || strings.HasPrefix(line, n+"{") {
				f := strings.Fields(line)
				v, err := strconv.ParseFloat(f[len(f)-1], 64)
				if err == nil {
					out[n] += v
				}
			}
		}
	}
	return out, sc.Err()
}

// procStatus reads kilobyte fields of /proc/PID/status.
func procStatus(pid int, fields ...string) map[string]float64 {
	out := map[string]float64{}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, f := range fields {
			if rest, ok := strings.CutPrefix(line, f+":"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				out[f] = kb
			}
		}
	}
	return out
}

// steadyRun runs a long-running controller over the n applications the
// applications workload just deployed, every one on a 10s interval, and
// samples its goroutines, heap and RSS every -sample (2s by default). Each
// sample is also appended to steady.csv in the output directory as it is
// taken, so an hour's run can be watched, and kept if it is cut short.
func (b *bench) steadyRun(ctx context.Context, n int) (*steadyResult, error) {
	c, err := b.startController(b.lastApps)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	res := &steadyResult{Apps: n, Duration: b.o.steady, Warmup: 20 * time.Second}
	if res.Warmup > b.o.steady/4 {
		res.Warmup = b.o.steady / 4
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "steady run: %d applications for %s\n", n, b.o.steady)
	passes := "flotilla_reconcile_duration_seconds_count"
	var passesAtWarmup, cpuAtWarmup float64
	warm := false
	csv, err := os.Create(filepath.Join(b.o.out, "steady.csv"))
	if err != nil {
		return nil, err
	}
	defer csv.Close()
	fmt.Fprintln(csv, "seconds,goroutines,heap_inuse_mb,vmrss_mb,process_rss_mb,passes,docker_requests,cpu_seconds")
	var total, atWarm counts
	b.px.take()
	tick := time.NewTicker(b.o.sample)
	defer tick.Stop()
	for time.Since(start) < b.o.steady {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		m, err := c.metrics("go_goroutines", "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes", passes)
		if err != nil {
			continue // not listening yet
		}
		st := procStatus(c.cmd.Process.Pid, "VmRSS")
		total = total.add(b.px.take())
		s := sample{At: time.Since(start), Goroutines: m["go_goroutines"],
			HeapMB: m["go_memstats_heap_inuse_bytes"] / (1 << 20), RSSMB: st["VmRSS"] / 1024,
			ProcRSSMB: m["process_resident_memory_bytes"] / (1 << 20), Passes: m[passes], Requests: total.Requests,
			CPU: cpuSeconds(c.cmd.Process.Pid)}
		res.Samples = append(res.Samples, s)
		fmt.Fprintf(csv, "%.0f,%.0f,%.2f,%.2f,%.2f,%.0f,%d,%.2f\n", s.At.Seconds(), s.Goroutines, s.HeapMB, s.RSSMB, s.ProcRSSMB, s.Passes, s.Requests, s.CPU)
		if !warm && time.Since(start) >= res.Warmup {
			warm = true
			atWarm = total
			passesAtWarmup = m[passes]
			cpuAtWarmup = s.CPU
		}
		res.Passes = int(m[passes] - passesAtWarmup)
	}
	total = total.add(b.px.take())
	res.counts = counts{Requests: total.Requests - atWarm.Requests, Writes: total.Writes - atWarm.Writes, Bytes: total.Bytes - atWarm.Bytes}
	res.PeakMB = procStatus(c.cmd.Process.Pid, "VmHWM")["VmHWM"] / 1024
	res.CPU = cpuSeconds(c.cmd.Process.Pid) - cpuAtWarmup // the process is still running here
	return res, nil
}

// cpuSeconds is the user+system time process pid has used so far, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux);
// 0 when it cannot be read.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after it are
	// counted from its closing parenthesis.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return (utime + stime) / 100
}
