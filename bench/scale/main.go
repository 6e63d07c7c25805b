// Command scale runs Flotilla's workloads at several sizes against `docker
// stack deploy` on the same swarm, in one run, and prints what each cost:
// wall time, Docker requests, writes and peak RSS, with the ratios. It also
// times commit-to-applied through a webhook, watches a long-running
// controller's goroutines, heap and RSS over a steady run, and draws PNG
// plots of cost against size into its output directory.
//
// Both tools talk to the daemon through one counting proxy, so their request
// counts are measured the same way. Flotilla runs as the built binary, one
// `controller --once` process per deploy (process start, git checks and
// release records included); docker runs with --resolve-image never, its
// fastest setting here. Services have 0 replicas unless a step says
// otherwise, so the figures are the control plane's, not the scheduler's.
//
//	go run ./bench/scale [-services 20,200] [-apps 1,10,100] [-steady 2m] [-out DIR]
//
// It is run by hand on a machine with a swarm, not in CI.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// row is one measured step of one tool.
type row struct {
	Workload string // "services" or "applications"
	Size     int
	Step     string
	Tool     string // "docker" or "flotilla"
	Seconds  float64
	CPU      float64 // user and system seconds of the process (summed over a loop)
	counts
	RSSKB int64 // peak RSS of the process (the largest one for a loop)
}

// usage is what one process, or a loop of them, cost.
type usage struct {
	wall, cpu time.Duration
	rssKB     int64
}

type options struct {
	flotilla string
	out      string
	services []int
	apps     []int
	appSvcs  int
	steady   time.Duration
	sample   time.Duration
	webhook  int
	repeat   int
	docker   bool
	daemon   string
}

func main() {
	var o options
	var services, apps string
	flag.StringVar(&o.flotilla, "flotilla", "", "flotilla binary (default: built from this checkout into -out)")
	flag.StringVar(&o.out, "out", "bench/scale/out", "output directory for the table and the plots")
	flag.StringVar(&services, "services", "20,200", "sizes of the one-stack workload, in services")
	flag.StringVar(&apps, "apps", "1,10,100", "sizes of the many-applications workload, in applications")
	flag.IntVar(&o.appSvcs, "app-services", 5, "services per application in the many-applications workload")
	flag.DurationVar(&o.steady, "steady", 2*time.Minute, "length of the steady run over the largest applications size; 0 skips it")
	flag.DurationVar(&o.sample, "sample", 2*time.Second, "how often the steady run samples the controller (and appends to steady.csv)")
	flag.IntVar(&o.webhook, "webhook", 5, "commits timed through a webhook; 0 skips it")
	flag.IntVar(&o.repeat, "repeat", 3, "runs of each workload and size; the table shows each step's median time")
	flag.BoolVar(&o.docker, "docker", true, "also run docker stack deploy (false measures Flotilla alone, for sizes too large to run both)")
	flag.StringVar(&o.daemon, "daemon", "/var/run/docker.sock", "the daemon's socket")
	flag.Parse()
	var err error
	if o.services, err = sizes(services); err != nil {
		log.Fatalf("-services: %v", err)
	}
	if o.apps, err = sizes(apps); err != nil {
		log.Fatalf("-apps: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

func sizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive size", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "flotilla-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if o.flotilla == "" {
		o.flotilla = filepath.Join(work, "flotilla")
		fmt.Fprintln(os.Stderr, "building flotilla")
		if out, err := exec.Command("go", "build", "-o", o.flotilla, "./cmd/flotilla").CombinedOutput(); err != nil {
			return fmt.Errorf("build flotilla: %v: %s", err, out)
		}
	}
	px, err := startProxy(filepath.Join(work, "docker.sock"), o.daemon)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	defer px.close()
	b := &bench{o: o, work: work, px: px, id: fmt.Sprintf("scale%d", os.Getpid())}
	defer b.cleanup()

	var all []row
	for _, n := range o.services {
		for range max(o.repeat, 1) {
			r, err := b.servicesWorkload(ctx, n)
			if err != nil {
				return fmt.Errorf("%d services: %w", n, err)
			}
			all = append(all, r...)
			b.cleanup()
		}
	}
	var st *steadyResult
	for i, n := range o.apps {
		for rep := range max(o.repeat, 1) {
			r, err := b.appsWorkload(ctx, n)
			if err != nil {
				return fmt.Errorf("%d applications: %w", n, err)
			}
			all = append(all, r...)
			if i == len(o.apps)-1 && rep == max(o.repeat, 1)-1 && o.steady > 0 {
				if st, err = b.steadyRun(ctx, n); err != nil {
					return fmt.Errorf("steady run: %w", err)
				}
			}
			b.cleanup()
		}
	}
	rows := medians(all)
	var wh *webhookResult
	if o.webhook > 0 {
		if wh, err = b.webhookRun(ctx, o.webhook); err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
		b.cleanup()
	}

	report := formatReport(rows, st, wh)
	fmt.Print(report)
	if err := os.WriteFile(filepath.Join(o.out, "results.txt"), []byte(report), 0o644); err != nil {
		return err
	}
	return drawPlots(o.out, rows, st)
}

// bench holds what every workload shares.
type bench struct {
	o    options
	work string
	px   *proxy
	id   string // controller id and prefix of every stack of this run
	// stacks lists what this run deployed, for cleanup.
	stacks   []string
	runs     int    // workloads run so far, to name each one's stacks apart
	lastApps string // directory of the last applications workload
}

// medians folds repeated runs of a step into one row: the median time,
// the median request and write counts and the largest RSS.
func medians(all []row) []row {
	type key struct {
		workload, step, tool string
		size                 int
	}
	var order []key
	groups := map[key][]row{}
	for _, r := range all {
		k := key{r.Workload, r.Step, r.Tool, r.Size}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	med := func(rs []row, get func(row) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out := make([]row, 0, len(order))
	for _, k := range order {
		rs := groups[k]
		r := rs[0]
		r.Seconds = med(rs, func(r row) float64 { return r.Seconds })
		r.CPU = med(rs, func(r row) float64 { return r.CPU })
		r.Requests = int(med(rs, func(r row) float64 { return float64(r.Requests) }))
		r.Writes = int(med(rs, func(r row) float64 { return float64(r.Writes) }))
		for _, x := range rs {
			r.RSSKB = max(r.RSSKB, x.RSSKB)
		}
		out = append(out, r)
	}
	return out
}

// timed runs one process through the proxy and measures it.
func (b *bench) timed(ctx context.Context, dir string, name string, args ...string) (usage, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+b.px.socket)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	u := usage{wall: time.Since(start)}
	if err != nil {
		return u, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.rssKB = ru.Maxrss // kilobytes on Linux
	}
	u.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return u, nil
}

// step runs fn once for tool and returns its row, with the proxy's counts
// of what fn sent.
func (b *bench) step(workload string, size int, step, tool string, fn func() (usage, error)) (row, error) {
	b.px.take()
	u, err := fn()
	c := b.px.take()
	if err != nil {
		return row{}, err
	}
	r := row{Workload: workload, Size: size, Step: step, Tool: tool, Seconds: u.wall.Seconds(), CPU: u.cpu.Seconds(), counts: c, RSSKB: u.rssKB}
	fmt.Fprintf(os.Stderr, "%-12s %5d %-20s %-8s %8.3fs %7.3fs cpu %6d requests %5d writes %6.1f MB\n",
		workload, size, step, tool, r.Seconds, r.CPU, c.Requests, c.Writes, float64(u.rssKB)/1024)
	return r, nil
}

// flotillaOnce runs one `controller --once` over apps in dir.
func (b *bench) flotillaOnce(ctx context.Context, dir string) (usage, error) {
	return b.timed(ctx, dir, b.o.flotilla, "controller", "--once", "--controller-id", b.id,
		"--config", "apps.yaml", "--data", "cache", "--log-level", "warn")
}

// dockerDeploy runs `docker stack deploy` once per stack, one after the
// other, as a script deploying them would; the time and counts are the
// loop's, the RSS the largest process's.
func (b *bench) dockerDeploy(ctx context.Context, dir string, stacks []string, file func(stack string) string) (usage, error) {
	var total usage
	for _, s := range stacks {
		u, err := b.timed(ctx, dir, "docker", "stack", "deploy", "--resolve-image", "never", "-c", file(s), s)
		if err != nil {
			return total, err
		}
		total.wall += u.wall
		total.cpu += u.cpu
		total.rssKB = max(total.rssKB, u.rssKB)
	}
	return total, nil
}
