package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// The crash-safety suite: the built controller, SIGKILLed by killProxy at
// the Nth Docker write of a first deploy and of an update (networks,
// configs, secrets, services, records, prunes), then restarted until a run
// succeeds. After each restart the stack must hold exactly what the newest
// record declares, every object once and carrying the owner stamp, records
// 1..n without gap or duplicate, no orphan after the prune (a superseded
// config or secret only within retainRotated or while a service mounts it),
// no create sent twice, each service updated at most once per change, and a
// further run must write nothing.
//
// The kill points are every write, killed before and after the daemon saw
// it, in a seeded random order: by default each once (at least 20);
// FLOTILLA_FAULT_RUNS sets how many, repeating them in new orders, and
// FLOTILLA_FAULT_SEED fixes the order. bench/soak.sh
// runs the same for many more points.

// First deploy: v1 is killed part-way; the restart is on v2, which drops
// three services, a network and a config, with prune on.
const faultFirstV1 = `version: "3.8"
x-svc: &svc
  image: flotilla-test/app:1
  stop_grace_period: 1s
  deploy: {replicas: 0}
services:
  web:
    <<: *svc
    networks: [front]
    configs: [{source: conf, target: /etc/app.conf}]
    secrets: [key]
  api:
    <<: *svc
    networks: [front]
    secrets: [key]
  worker:
    <<: *svc
    networks: [back]
    configs: [{source: extra, target: /etc/extra.conf}]
  cron:
    <<: *svc
    networks: [back]
  batch:
    <<: *svc
    networks: [back]
networks:
  front: {driver: overlay}
  back: {driver: overlay}
configs:
  conf: {file: ./app.conf}
  extra: {file: ./extra.conf}
secrets:
  key: {file: ./key.txt}
`

const faultFirstV2 = `version: "3.8"
x-svc: &svc
  image: flotilla-test/app:1
  stop_grace_period: 1s
  deploy: {replicas: 0}
services:
  web:
    <<: *svc
    networks: [front]
    configs: [{source: conf, target: /etc/app.conf}]
    secrets: [key]
  api:
    <<: *svc
    networks: [front]
    secrets: [key]
networks:
  front: {driver: overlay}
configs:
  conf: {file: ./app.conf}
secrets:
  key: {file: ./key.txt}
`

// Update: v1 is deployed cleanly; v2 rotates a config and a secret, changes
// an env, adds a service on a new network and drops two services and their
// network, and is killed part-way. Half the restarts are on v3, which
// rotates the config once more: a crash during a rotation followed by a new
// commit.
const faultUpdateV1 = `version: "3.8"
x-svc: &svc
  image: flotilla-test/app:1
  stop_grace_period: 1s
  deploy: {replicas: 0}
services:
  web:
    <<: *svc
    environment: {MSG: one}
    networks: [front]
    configs: [{source: conf, target: /etc/app.conf}]
    secrets: [key]
  api:
    <<: *svc
    environment: {MSG: one}
    networks: [front]
  side:
    <<: *svc
    networks: [front]
    configs: [{source: conf, target: /etc/app.conf}]
  old:
    <<: *svc
    networks: [legacy]
  older:
    <<: *svc
    networks: [legacy]
networks:
  front: {driver: overlay}
  legacy: {driver: overlay}
configs:
  conf: {file: ./app.conf}
secrets:
  key: {file: ./key.txt}
`

const faultUpdateV2 = `version: "3.8"
x-svc: &svc
  image: flotilla-test/app:1
  stop_grace_period: 1s
  deploy: {replicas: 0}
services:
  web:
    <<: *svc
    environment: {MSG: one}
    networks: [front]
    configs: [{source: conf, target: /etc/app.conf}]
    secrets: [key]
  api:
    <<: *svc
    environment: {MSG: two}
    networks: [front]
  side:
    <<: *svc
    networks: [front]
    configs: [{source: conf, target: /etc/app.conf}]
  fresh:
    <<: *svc
    networks: [edge]
networks:
  front: {driver: overlay}
  edge: {driver: overlay}
configs:
  conf: {file: ./app.conf}
secrets:
  key: {file: ./key.txt}
`

func faultFiles(compose, conf string) map[string]string {
	return map[string]string{
		"deploy/docker-compose.yml": compose,
		"deploy/app.conf":           conf,
		"deploy/extra.conf":         "extra = 1\n",
		"deploy/key.txt":            "k3y-" + conf,
	}
}

// faultRig is one application on its own stack, repository, controller id
// and proxy, driven through the built binary.
type faultRig struct {
	t        *testing.T
	bin      string
	stack    string
	id       string
	repo     *gittest.Repo
	appsFile string
	dataDir  string
	proxy    *killProxy
	logs     bytes.Buffer
	// killOn, when set, arms the next run to be killed at the first write
	// of that "kind op" instead of at a write count.
	killOn string
}

const faultRetainRotated = 1

func newFaultRig(t *testing.T, bin, prefix string) *faultRig {
	t.Helper()
	stack := swarmtest.Name(t, prefix)
	swarmtest.Cleanup(t, stack)
	r := &faultRig{t: t, bin: bin, stack: stack, id: "fault-" + stack, repo: gittest.New(t), proxy: newKillProxy(t)}
	dir := t.TempDir()
	r.dataDir = filepath.Join(dir, "data")
	r.appsFile = filepath.Join(dir, "applications.yaml")
	apps := fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s
    source: {repoURL: %[2]s, revision: main, path: deploy}
    stack: %[1]s
    history: 20
    syncPolicy:
      automated: {prune: true}
      retainRotated: %[3]d
`, stack, r.repo.Dir, faultRetainRotated)
	if err := os.WriteFile(r.appsFile, []byte(apps), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller logs:\n%s", r.logs.String())
		}
	})
	return r
}

// run runs `controller --once` through the proxy, killed at write killAt
// (after the daemon answered it, with after) or not at all for 0. It
// returns the exit code (-1 when killed), whether the proxy killed it, and
// the writes it sent.
func (r *faultRig) run(killAt int, after bool) (code int, killed bool, writes int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, "controller", "--once", "--config", r.appsFile, "--data", r.dataDir,
		"--controller-id", r.id, "--listen", "", "--log-level", "info")
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+r.proxy.Socket)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var procMu sync.Mutex
	kill := func() {
		procMu.Lock()
		defer procMu.Unlock()
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
	}
	if r.killOn != "" {
		r.proxy.armOn(r.killOn, after, kill)
		r.killOn = ""
	} else {
		r.proxy.arm(killAt, after, kill)
	}
	procMu.Lock()
	err := cmd.Start()
	procMu.Unlock()
	if err != nil {
		r.t.Fatal(err)
	}
	err = cmd.Wait()
	writes, killed = r.proxy.runWrites()
	fmt.Fprintf(&r.logs, "--- run (kill at %d, after %v): killed %v, writes %d, err %v\n%s", killAt, after, killed, writes, err, out.String())
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, killed, writes
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode(), killed, writes
	case errors.As(err, &ee):
		return -1, killed, writes
	}
	r.t.Fatalf("controller run: %v", err)
	return 0, false, 0
}

// recover runs the controller until a run succeeds (at most three) and
// then once more, which must write nothing.
func (r *faultRig) recover() (runs int) {
	r.t.Helper()
	for runs = 1; ; runs++ {
		code, _, _ := r.run(0, false)
		if code == 0 {
			break
		}
		if runs == 3 {
			r.t.Fatalf("no successful run in %d restarts (exit %d)", runs, code)
		}
	}
	if code, _, writes := r.run(0, false); code != 0 || writes != 0 {
		r.t.Fatalf("the run after convergence: exit %d, %d writes; want 0 and none", code, writes)
	}
	return runs
}

// checkConverged checks the stack against the newest record, which must be
// of commit, and the proxy's log against the allowed number of updates per
// service (services not named may not be updated at all).
func (r *faultRig) checkConverged(commit string, updates map[string]int) {
	r.t.Helper()
	ctx := context.Background()
	c := swarmtest.Client(r.t)
	b, err := backend.New(ctx, backend.Options{Logger: quiet})
	if err != nil {
		r.t.Fatal(err)
	}

	// Records: 1..n, once each, the newest of commit.
	recs, err := c.ConfigList(ctx, client.ConfigListOptions{Filters: make(client.Filters).Add("label", backend.LabelRecord+"=release").Add("label", backend.LabelRelease+"="+r.stack)})
	if err != nil {
		r.t.Fatal(err)
	}
	var revs []int
	for _, rc := range recs.Items {
		n, _ := strconv.Atoi(rc.Spec.Labels[backend.LabelRevision])
		revs = append(revs, n)
	}
	slices.Sort(revs)
	for i, n := range revs {
		if n != i+1 {
			r.t.Fatalf("record revisions %v: want 1..%d without gap or duplicate", revs, len(revs))
		}
	}
	rels, err := b.Releases(ctx, r.stack)
	if err != nil || len(rels) == 0 {
		r.t.Fatalf("records: %v, %v", len(rels), err)
	}
	if rels[0].Commit != commit {
		r.t.Fatalf("newest record is of commit %.12s, want %.12s", rels[0].Commit, commit)
	}
	want, err := b.DeclaredResources(ctx, rels[0].Manifest, r.stack)
	if err != nil {
		r.t.Fatal(err)
	}
	recorded := map[string]bool{} // what any stored revision declared
	for _, rel := range rels {
		d, err := b.DeclaredResources(ctx, rel.Manifest, r.stack)
		if err != nil {
			r.t.Fatal(err)
		}
		for name := range d.Configs {
			recorded["config "+name] = true
		}
		for name := range d.Secrets {
			recorded["secret "+name] = true
		}
	}

	owner := r.id + "/" + r.stack
	ns := make(client.Filters).Add("label", "com.docker.stack.namespace="+r.stack)
	services, err := c.ServiceList(ctx, client.ServiceListOptions{Filters: ns})
	if err != nil {
		r.t.Fatal(err)
	}
	nets, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: ns})
	if err != nil {
		r.t.Fatal(err)
	}
	configs, err := c.ConfigList(ctx, client.ConfigListOptions{Filters: ns})
	if err != nil {
		r.t.Fatal(err)
	}
	secrets, err := c.SecretList(ctx, client.SecretListOptions{Filters: ns})
	if err != nil {
		r.t.Fatal(err)
	}
	inUse := map[string]bool{}
	var liveServices, liveNets, liveConfigs, liveSecrets []string
	stamps := map[string]string{}
	for _, s := range services.Items {
		liveServices = append(liveServices, s.Spec.Name)
		stamps["service "+s.Spec.Name] = s.Spec.Labels[backend.LabelOwner]
		for _, spec := range []*swarm.ServiceSpec{&s.Spec, s.PreviousSpec} {
			if spec == nil || spec.TaskTemplate.ContainerSpec == nil {
				continue
			}
			for _, cr := range spec.TaskTemplate.ContainerSpec.Configs {
				inUse["config "+cr.ConfigName] = true
			}
			for _, sr := range spec.TaskTemplate.ContainerSpec.Secrets {
				inUse["secret "+sr.SecretName] = true
			}
		}
	}
	for _, n := range nets.Items {
		liveNets = append(liveNets, n.Name)
		stamps["network "+n.Name] = n.Labels[backend.LabelOwner]
	}
	for _, cf := range configs.Items {
		liveConfigs = append(liveConfigs, cf.Spec.Name)
		stamps["config "+cf.Spec.Name] = cf.Spec.Labels[backend.LabelOwner]
	}
	for _, s := range secrets.Items {
		liveSecrets = append(liveSecrets, s.Spec.Name)
		stamps["secret "+s.Spec.Name] = s.Spec.Labels[backend.LabelOwner]
	}
	for obj, got := range stamps {
		if got != owner {
			r.t.Errorf("%s carries owner stamp %q, want %q", obj, got, owner)
		}
	}
	exactly := func(kind string, live, declared []string) {
		slices.Sort(live)
		slices.Sort(declared)
		if !slices.Equal(live, declared) {
			r.t.Errorf("live %ss %v, want exactly %v, once each", kind, live, declared)
		}
	}
	exactly("service", liveServices, sortedKeys(want.Services))
	exactly("network", liveNets, sortedKeys(want.Networks))
	rotated := func(kind string, live, declared []string) {
		if d := slices.Compact(slices.Sorted(slices.Values(live))); len(d) != len(live) {
			r.t.Errorf("live %ss %v hold a name twice", kind, live)
		}
		family := func(name string) string { return name[:max(strings.LastIndexByte(name, '-'), 0)] }
		spare := map[string]int{}
		for _, name := range declared {
			if !slices.Contains(live, name) {
				r.t.Errorf("declared %s %s is missing", kind, name)
			}
			spare[family(name)] = 0
		}
		for _, name := range live {
			if slices.Contains(declared, name) {
				continue
			}
			n, current := spare[family(name)]
			switch {
			case !current:
				r.t.Errorf("orphan %s %s: its family is no longer declared", kind, name)
			case inUse[kind+" "+name]:
			case !recorded[kind+" "+name]:
				r.t.Errorf("orphan %s %s: no service mounts it and no stored revision declares it", kind, name)
			default:
				spare[family(name)] = n + 1
			}
		}
		for f, n := range spare {
			if n > faultRetainRotated {
				r.t.Errorf("%d superseded %ss of %s no service mounts, over retainRotated %d", n, kind, f, faultRetainRotated)
			}
		}
	}
	rotated("config", liveConfigs, sortedKeys(want.Configs))
	rotated("secret", liveSecrets, sortedKeys(want.Secrets))

	// Writes: no create the daemon carried out sent again, no service
	// updated more often than it changed. A deploy's creates run
	// concurrently, so a kill can cut off creates still in flight (status
	// 0, the proxy's request cancelled with the process): whether one took
	// effect is what the restart reads from the swarm, and a duplicate it
	// made would show above as a live object twice.
	creates := map[string]int{}
	updated := map[string]int{}
	for _, e := range r.proxy.log() {
		switch e.Op {
		case "create":
			if e.Status/100 == 2 {
				creates[e.Kind+" "+e.Name]++
			}
		case "update":
			if e.Kind == "service" && e.Status/100 == 2 {
				updated[strings.TrimPrefix(e.Name, r.stack+"_")]++
			}
		}
	}
	for obj, n := range creates {
		if n > 1 {
			r.t.Errorf("%s was created %d times", obj, n)
		}
	}
	for svc, n := range updated {
		if n > updates[svc] {
			r.t.Errorf("service %s was updated %d times, for %d changes", svc, n, updates[svc])
		}
	}
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// faultRuns returns how many kill points to run over total writes, and the
// seed of their order: by default every point, and never fewer than 20.
func faultRuns(t *testing.T, total int) (int, uint64) {
	runs := max(20, 2*total)
	if s := os.Getenv("FLOTILLA_FAULT_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FLOTILLA_FAULT_RUNS=%q: want a positive number", s)
		}
		runs = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLOTILLA_FAULT_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FLOTILLA_FAULT_SEED=%q: want a number", s)
		}
		seed = n
	}
	t.Logf("%d kill points, FLOTILLA_FAULT_SEED=%d", runs, seed)
	return runs, seed
}

// killPoints lists runs kill points over writes 1..total, each killed
// before and after the daemon saw it, in a seeded random order; when runs
// exceeds the distinct points they repeat in a new order.
type killPoint struct {
	at    int
	after bool
}

func (k killPoint) String() string {
	if k.after {
		return fmt.Sprintf("after-write-%02d", k.at)
	}
	return fmt.Sprintf("before-write-%02d", k.at)
}

func killPoints(runs, total int, seed uint64) []killPoint {
	rng := rand.New(rand.NewPCG(seed, uint64(total)))
	var out []killPoint
	for len(out) < runs {
		var round []killPoint
		for at := 1; at <= total; at++ {
			round = append(round, killPoint{at, false}, killPoint{at, true})
		}
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		out = append(out, round...)
	}
	return out[:runs]
}

// faultMatrix collects per-scenario outcomes for the test log, the figures
// docs/reliability.md quotes.
type faultMatrix struct {
	mu       sync.Mutex
	runs     int
	restarts int
}

func (m *faultMatrix) add(restarts int) {
	m.mu.Lock()
	m.runs++
	m.restarts += restarts
	m.mu.Unlock()
}

// eachKillPoint runs one scenario per kill point as parallel subtests, each
// returning how many restarts it took to converge, and logs the matrix's
// figures (the ones docs/reliability.md quotes) once all have run.
func eachKillPoint(t *testing.T, label string, total, n int, name func(int) string, run func(t *testing.T, i int) int) {
	var m faultMatrix
	t.Run("points", func(t *testing.T) {
		for i := range n {
			t.Run(name(i), func(t *testing.T) {
				t.Parallel()
				restarts := run(t, i)
				if !t.Failed() {
					m.add(restarts)
				}
			})
		}
	})
	t.Logf("%s: %d writes per run, %d kill points converged, %d restarts in all", label, total, m.runs, m.restarts)
}

func TestCrashSafetyOfAFirstDeployKilledAtEveryWrite(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)

	// A clean run measures how many writes a first deploy makes.
	clean := newFaultRig(t, bin, "fclean")
	clean.repo.Commit("v1", faultFiles(faultFirstV1, "one\n"))
	code, _, total := clean.run(0, false)
	if code != 0 || total < 10 {
		t.Fatalf("clean first deploy: exit %d, %d writes", code, total)
	}
	runs, seed := faultRuns(t, total)
	points := killPoints(runs, total, seed)
	eachKillPoint(t, "first deploy", total, len(points), func(i int) string { return points[i].String() },
		func(t *testing.T, i int) int {
			kp := points[i]
			r := newFaultRig(t, bin, "ffirst")
			r.repo.Commit("v1", faultFiles(faultFirstV1, "one\n"))
			if _, killed, _ := r.run(kp.at, kp.after); !killed {
				t.Fatalf("the controller was not killed at write %d", kp.at)
			}
			v2 := r.repo.Commit("v2 drops three services, a network and a config", faultFiles(faultFirstV2, "one\n"))
			restarts := r.recover()
			r.checkConverged(v2, nil)
			return restarts
		})
}

func TestCrashSafetyOfAnUpdateKilledAtEveryWrite(t *testing.T) {
	t.Parallel()
	bin := flotillaBinary(t)

	clean := newFaultRig(t, bin, "fclean")
	clean.repo.Commit("v1", faultFiles(faultUpdateV1, "one\n"))
	if code, _, _ := clean.run(0, false); code != 0 {
		t.Fatalf("clean v1: exit %d", code)
	}
	clean.repo.Commit("v2", faultFiles(faultUpdateV2, "two\n"))
	code, _, total := clean.run(0, false)
	if code != 0 || total < 10 {
		t.Fatalf("clean update: exit %d, %d writes", code, total)
	}
	runs, seed := faultRuns(t, total)
	rng := rand.New(rand.NewPCG(seed, 3))
	points := killPoints(runs, total, seed)
	// Half the points, drawn from the seed, see one more commit before the
	// restart: the config rotates again while the update is half done.
	thenV3 := make([]bool, len(points))
	for i := range thenV3 {
		thenV3[i] = rng.IntN(2) == 1
	}
	name := func(i int) string {
		if thenV3[i] {
			return points[i].String() + "-then-v3"
		}
		return points[i].String()
	}
	eachKillPoint(t, "update", total, len(points), name, func(t *testing.T, i int) int {
		kp := points[i]
		r := newFaultRig(t, bin, "fupdate")
		r.repo.Commit("v1", faultFiles(faultUpdateV1, "one\n"))
		if code, _, _ := r.run(0, false); code != 0 {
			t.Fatalf("v1: exit %d", code)
		}
		final := r.repo.Commit("v2", faultFiles(faultUpdateV2, "two\n"))
		if _, killed, _ := r.run(kp.at, kp.after); !killed {
			t.Fatalf("the controller was not killed at write %d", kp.at)
		}
		updates := map[string]int{"web": 1, "api": 1, "side": 1}
		if thenV3[i] {
			// The config rotates again: web and side change once more.
			final = r.repo.Commit("v3 rotates the config again", faultFiles(faultUpdateV2, "three\n"))
			updates["web"], updates["side"] = 2, 2
		}
		restarts := r.recover()
		r.checkConverged(final, updates)
		return restarts
	})
}

// The two windows of a crash between the first write and the release
// record, each at its exact write: after every create of a first deploy and
// before its record, then a commit that drops objects; and right after the
// new version of a rotated config was created, then a commit that rotates
// it again.
func TestACrashBeforeTheFirstRecordLeaksNothingOnceACommitDropsObjects(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, flotillaBinary(t), "fwindow")
	r.repo.Commit("v1", faultFiles(faultFirstV1, "one\n"))
	// Ten creates (two networks, two configs, a secret, five services),
	// then the record: killed before it reaches the daemon.
	if _, killed, writes := r.run(11, false); !killed || writes != 11 {
		t.Fatalf("killed %v at write %d, want the record's write 11", killed, writes)
	}
	if e := r.proxy.log(); len(e) != 10 || e[9].Kind != "service" {
		t.Fatalf("writes before the kill: %+v", e)
	}
	v2 := r.repo.Commit("v2 drops three services, a network and a config", faultFiles(faultFirstV2, "one\n"))
	r.recover()
	r.checkConverged(v2, nil)
}

func TestACrashDuringAConfigRotationThenANewCommitKeepsOnlyWhatRetentionAllows(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t, flotillaBinary(t), "fwindow")
	r.repo.Commit("v1", faultFiles(faultUpdateV1, "one\n"))
	if code, _, _ := r.run(0, false); code != 0 {
		t.Fatalf("v1: exit %d", code)
	}
	r.repo.Commit("v2", faultFiles(faultUpdateV2, "two\n"))
	// The update creates a new network and the rotated config, at once:
	// killed once the daemon has created the config.
	r.killOn = "config create"
	if _, killed, _ := r.run(0, true); !killed {
		t.Fatal("not killed at the config's create")
	}
	// A write already in flight beside the config's (the new network) may
	// still complete; no service may have been written.
	rotated := false
	for _, e := range r.proxy.log() {
		if e.Run != 2 {
			continue
		}
		switch {
		case e.Kind == "config" && e.Op == "create" && e.Status == http.StatusCreated:
			rotated = true
		case e.Kind == "service":
			t.Fatalf("a service was written before the kill: %+v", e)
		}
	}
	if !rotated {
		t.Fatalf("the rotated config was not created before the kill: %+v", r.proxy.log())
	}
	v3 := r.repo.Commit("v3 rotates the config again", faultFiles(faultUpdateV2, "three\n"))
	r.recover()
	r.checkConverged(v3, map[string]int{"web": 1, "api": 1, "side": 1})
}
