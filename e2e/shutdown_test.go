package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
	"github.com/flotilla-gitops/flotilla/internal/syncbuf"
)

// A controller stopped by Swarm, systemd or Ctrl-C gets SIGTERM or SIGINT
// and then, after a grace period, SIGKILL. These tests run the built binary
// and send it the signal, idle and in the middle of a pass, with the API on
// and off, and hold it to the exit status and the deadline.

// stopDeadline is how long a test waits for the process after the signal:
// the default --shutdown-timeout plus room for a loaded machine.
const stopDeadline = 15 * time.Second

// lockedBuffer collects a process's output for the test to read while the
// process writes it.
type lockedBuffer = syncbuf.Buffer

// stoppable is one controller process.
type stoppable struct {
	t      *testing.T
	cmd    *exec.Cmd
	logs   *lockedBuffer
	exited chan struct{}
	code   int
}

// startController runs `flotilla controller` on appsFile with extra flags
// and environment; its process is killed at cleanup if a test left it.
func startController(t *testing.T, appsFile, id string, env []string, flags ...string) *stoppable {
	t.Helper()
	cmd := exec.Command(flotillaBinary(t), controllerArgs(t, appsFile, id, flags)...)
	cmd.Env = append(os.Environ(), env...)
	return startProcess(t, cmd)
}

func controllerArgs(t *testing.T, appsFile, id string, flags []string) []string {
	return append([]string{"controller", "--config", appsFile, "--data", filepath.Join(t.TempDir(), "data"),
		"--controller-id", id, "--log-level", "debug"}, flags...)
}

// startControllerOnDaemonNet is startController run where the daemon's
// host network is (swarmtest.Command): in the engine's network namespace
// for an engine started by engine-up.sh, so the controller reaches what
// listens there (swarmtest.ListenTCP).
func startControllerOnDaemonNet(t *testing.T, appsFile, id string, env []string, flags ...string) *stoppable {
	t.Helper()
	cmd := swarmtest.Command(flotillaBinary(t), controllerArgs(t, appsFile, id, flags)...)
	cmd.Env = append(os.Environ(), env...)
	return startProcess(t, cmd)
}

// startProcess starts a controller's command; its process is killed at
// cleanup if a test left it, and its log shown if the test failed.
func startProcess(t *testing.T, cmd *exec.Cmd) *stoppable {
	t.Helper()
	s := &stoppable{t: t, cmd: cmd, logs: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		s.code = cmd.ProcessState.ExitCode()
		if err != nil && s.code == 0 {
			s.code = -1
		}
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", s.logs)
		}
	})
	return s
}

// waitLog waits until the log has a line containing text.
func (s *stoppable) waitLog(text string, within time.Duration) {
	s.t.Helper()
	swarmtest.Eventually(s.t, within, func() (bool, string) {
		select {
		case <-s.exited:
			s.t.Fatalf("controller exited (%d) before logging %q", s.code, text)
		default:
		}
		return strings.Contains(s.logs.String(), text), "no log line with " + text
	})
}

// stop sends sig and returns the exit code and how long the process took,
// failing the test if it outlives within.
func (s *stoppable) stop(sig os.Signal, within time.Duration) (int, time.Duration) {
	s.t.Helper()
	sent := time.Now()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.exited:
		return s.code, time.Since(sent)
	case <-time.After(within):
		s.t.Fatalf("controller still running %s after %v", within, sig)
		return 0, 0
	}
}

// shutdownApps writes an applications file with one automated application
// on stack, with extra lines appended to its syncPolicy.
func shutdownApps(t *testing.T, stack, repoDir, syncPolicyExtra string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "applications.yaml")
	body := fmt.Sprintf(`apiVersion: flotilla/v1
applications:
  - name: %[1]s
    source:
      repoURL: %[2]s
      revision: main
      path: deploy
    stack: %[1]s
    syncPolicy:
      automated: {}
      interval: 10m
%[3]s`, stack, repoDir, syncPolicyExtra)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

const idleStack = `version: "3.8"
services:
  web:
    image: flotilla-test/app:1
    stop_grace_period: 1s
    deploy:
      replicas: 0
`

// neverHealthy declares a service whose image does not exist: it is created
// at once and never runs, so a sync that waits for it waits its whole
// timeout.
const neverHealthy = `version: "3.8"
services:
  web:
    image: flotilla-test/never-built:1
    stop_grace_period: 1s
`

func TestControllerExitsZeroOnSIGTERMWhenIdle(t *testing.T) {
	for _, mode := range []string{"api", "no-api"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			stack := swarmtest.Name(t, "stopidle")
			swarmtest.Cleanup(t, stack)
			repo := gittest.New(t)
			repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": idleStack})
			flags := []string{"--listen", ""}
			if mode == "api" {
				flags = []string{"--listen", freeAddr(t), "--insecure-no-auth"}
			}
			c := startController(t, shutdownApps(t, stack, repo.Dir, ""), stack, nil, flags...)
			c.waitLog("deployed revision", 60*time.Second)
			code, took := c.stop(syscall.SIGTERM, stopDeadline)
			if code != 0 {
				t.Fatalf("exit status %d after SIGTERM, want 0", code)
			}
			if !strings.Contains(c.logs.String(), "controller stopped") {
				t.Fatal("no \"controller stopped\" line")
			}
			t.Logf("stopped in %s", took)
		})
	}
}

func TestControllerExitsZeroOnSIGINTWithTheAPIOn(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "stopint")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": idleStack})
	c := startController(t, shutdownApps(t, stack, repo.Dir, ""), stack, nil, "--listen", freeAddr(t), "--insecure-no-auth")
	c.waitLog("deployed revision", 60*time.Second)
	if code, _ := c.stop(os.Interrupt, stopDeadline); code != 0 {
		t.Fatalf("exit status %d after SIGINT, want 0", code)
	}
}

// A pass waiting for its stack to converge (syncPolicy.wait, ten minutes)
// is not writing: SIGTERM ends it at once, and with the API on the event
// stream and a waited sync queued behind the pass are ended too, so the
// process exits 0 well within the shutdown timeout.
func TestSIGTERMDuringAWaitingSyncEndsThePassAndExitsZero(t *testing.T) {
	for _, mode := range []string{"api", "no-api"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			stack := swarmtest.Name(t, "stopwait")
			swarmtest.Cleanup(t, stack)
			repo := gittest.New(t)
			repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": neverHealthy})
			addr := freeAddr(t)
			flags := []string{"--listen", ""}
			if mode == "api" {
				flags = []string{"--listen", addr, "--insecure-no-auth"}
			}
			apps := shutdownApps(t, stack, repo.Dir, "      wait: {timeout: 10m}\n")
			c := startController(t, apps, stack, nil, flags...)
			// The service exists once apply is done; the pass then waits.
			swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
				_, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_web", client.ServiceInspectOptions{})
				return err == nil, fmt.Sprint(err)
			})

			var stream, waited chan string
			if mode == "api" {
				stream = openEventStream(t, "http://"+addr)
				waited = waitedSync(t, "http://"+addr, stack)
				c.waitLog("sync requested", 10*time.Second)
			}
			code, took := c.stop(syscall.SIGTERM, stopDeadline)
			if code != 0 {
				t.Fatalf("exit status %d after SIGTERM mid-pass, want 0", code)
			}
			if !strings.Contains(c.logs.String(), "pass failed") || !strings.Contains(c.logs.String(), "wait") {
				t.Error("the waiting pass did not end with the stop")
			}
			if mode == "api" {
				if got := <-stream; got != "EOF" {
					t.Errorf("event stream ended with %q, want a clean end", got)
				}
				if got := <-waited; !strings.HasPrefix(got, "503") {
					t.Errorf("waited sync answered %q, want 503", got)
				}
			}
			t.Logf("stopped mid-pass in %s", took)
		})
	}
}

// openEventStream subscribes to the controller's events and reports how the
// stream ended: "EOF" for a clean end, or the error.
func openEventStream(t *testing.T, server string) chan string {
	t.Helper()
	resp, err := http.Get(server + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %s", resp.Status)
	}
	ended := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		_, err := io.Copy(io.Discard, resp.Body)
		if err == nil {
			ended <- "EOF"
			return
		}
		ended <- err.Error()
	}()
	return ended
}

// waitedSync asks for a sync that waits for its pass, and returns the answer
// once it comes as "STATUS body".
func waitedSync(t *testing.T, server, app string) chan string {
	t.Helper()
	answered := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, server+"/api/v1/applications/"+app+"/sync?wait=true&timeout=5m", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.RequestHeader, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	return answered
}

// stallingDaemon is a Docker socket in front of the real one that holds
// every request hold matches until released. A slow daemon, without
// touching the daemon every other test shares.
type stallingDaemon struct {
	path    string
	held    chan struct{} // receives when a creation is being held
	release chan struct{} // closed to let held creations through
	// over is set when the test ends: a request still held then is
	// refused, not passed on, so no write lands on the daemon while the
	// stack's cleanup removes its objects (a service created between the
	// cleanup's listing of services and its removal of the network would
	// keep the network in use).
	over atomic.Bool
}

// holdCreations matches service creations.
func holdCreations(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/services/create")
}

func newStallingDaemon(t *testing.T, hold func(*http.Request) bool) *stallingDaemon {
	t.Helper()
	d := &stallingDaemon{path: filepath.Join(t.TempDir(), "docker.sock"), held: make(chan struct{}, 16), release: make(chan struct{})}
	ln, err := net.Listen("unix", d.path)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "docker"})
			r.Out.Host = r.In.Host
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", swarmtest.Socket())
		}},
		FlushInterval: -1,
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold(r) {
			select {
			case d.held <- struct{}{}:
			default:
			}
			<-d.release
			if d.over.Load() {
				http.Error(w, "the test is over", http.StatusServiceUnavailable)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		d.over.Store(true)
		select {
		case <-d.release:
		default:
			close(d.release)
		}
		_ = srv.Close()
	})
	return d
}

// A pass that is writing when SIGTERM comes finishes the write: the
// service creation the daemon was slow to take goes through, the release
// is recorded, and then the pass stops and the process exits 0.
func TestSIGTERMDuringAWriteLetsTheWriteFinishThenExitsZero(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "stopwrite")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": idleStack})
	d := newStallingDaemon(t, holdCreations)
	c := startController(t, shutdownApps(t, stack, repo.Dir, ""), stack, []string{"DOCKER_HOST=unix://" + d.path},
		"--listen", freeAddr(t), "--insecure-no-auth", "--shutdown-timeout", "30s")
	select {
	case <-d.held:
	case <-time.After(60 * time.Second):
		t.Fatal("the controller never tried to create the service")
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.waitLog("stopping: no new pass starts", 10*time.Second)
	time.Sleep(time.Second) // the client would have cut the request by now
	close(d.release)
	select {
	case <-c.exited:
	case <-time.After(stopDeadline):
		t.Fatal("controller still running after the held write was released")
	}
	if c.code != 0 {
		t.Fatalf("exit status %d, want 0", c.code)
	}
	if _, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_web", client.ServiceInspectOptions{}); err != nil {
		t.Fatalf("the write in flight at SIGTERM did not finish: %v", err)
	}
	be, err := backend.New(context.Background(), backend.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rels, err := be.Releases(context.Background(), stack)
	if err != nil || len(rels) != 1 || rels[0].Revision != 1 {
		t.Fatalf("release records after the stop: %+v, %v; want revision 1 recorded", rels, err)
	}
}

// A write the daemon never finishes cannot hold the process past
// --shutdown-timeout: it exits 1 and says what was still running.
func TestShutdownPastItsTimeoutExitsNonZeroAndNamesWhatStillRuns(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "stoplate")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": idleStack})
	d := newStallingDaemon(t, holdCreations)
	c := startController(t, shutdownApps(t, stack, repo.Dir, ""), stack, []string{"DOCKER_HOST=unix://" + d.path},
		"--listen", "", "--shutdown-timeout", "2s")
	select {
	case <-d.held:
	case <-time.After(60 * time.Second):
		t.Fatal("the controller never tried to create the service")
	}
	code, took := c.stop(syscall.SIGTERM, stopDeadline)
	if code != 1 {
		t.Fatalf("exit status %d past the shutdown timeout, want 1", code)
	}
	if took < 2*time.Second {
		t.Errorf("exited after %s, before its 2s shutdown timeout", took)
	}
	var line string
	sc := bufio.NewScanner(strings.NewReader(c.logs.String()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "shutdown timed out") {
			line = sc.Text()
		}
	}
	if !strings.Contains(line, "passes of "+stack) {
		t.Fatalf("timeout line %q does not name the pass still running", line)
	}
}

// A daemon that stops answering makes /readyz say so within its own
// deadline instead of hanging the probe with it.
func TestReadyzAnswers503WithinItsDeadlineWhenTheDaemonHangs(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "readyhang")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": idleStack})
	var hang atomic.Bool
	d := newStallingDaemon(t, func(r *http.Request) bool { return hang.Load() && strings.HasSuffix(r.URL.Path, "/nodes") })
	addr := freeAddr(t)
	startController(t, shutdownApps(t, stack, repo.Dir, ""), stack, []string{"DOCKER_HOST=unix://" + d.path},
		"--listen", addr, "--insecure-no-auth")
	probe := func() (int, string, time.Duration) {
		c := &http.Client{Timeout: 20 * time.Second}
		began := time.Now()
		resp, err := c.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0, err.Error(), time.Since(began)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(began)
	}
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		code, body, _ := probe()
		return code == http.StatusOK, body
	})
	hang.Store(true)
	code, body, took := probe()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "did not answer within 2s") {
		t.Fatalf("/readyz with a hung daemon: %d %s after %s", code, body, took)
	}
	t.Logf("/readyz answered 503 after %s", took.Round(time.Millisecond))
}

// The notifications of the passes a stop ends still go out before the
// process exits, even to a receiver that is slow to answer.
func TestSIGTERMSendsTheLastPassesNotificationsBeforeExiting(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "stopnote")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": neverHealthy})
	var mu sync.Mutex
	var got []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		time.Sleep(500 * time.Millisecond)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	t.Cleanup(sink.Close)
	apps := waitingAppsNotifying(t, stack, repo.Dir, sink.URL)
	c := startController(t, apps, stack, nil, "--listen", "")
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		_, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_web", client.ServiceInspectOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if code, _ := c.stop(syscall.SIGTERM, stopDeadline); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !strings.Contains(got[0], `"sync.failed"`) || !strings.Contains(got[0], stack) {
		t.Fatalf("notifications received by the time the process exited: %q, want the stopped pass's sync.failed", got)
	}
}

// waitingAppsNotifying is an applications file whose one application waits
// for a service that never becomes healthy, with a webhook sink at url for
// its sync.failed events.
func waitingAppsNotifying(t *testing.T, stack, repoDir, url string) string {
	t.Helper()
	urlFile := filepath.Join(t.TempDir(), "sink-url")
	if err := os.WriteFile(urlFile, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	apps := shutdownApps(t, stack, repoDir, "      wait: {timeout: 10m}\n")
	body, err := os.ReadFile(apps)
	if err != nil {
		t.Fatal(err)
	}
	notes := fmt.Sprintf("notifications:\n  - name: recorder\n    type: webhook\n    urlFile: %s\n    events: [sync.failed]\n", urlFile)
	if err := os.WriteFile(apps, []byte(strings.Replace(string(body), "applications:\n", notes+"applications:\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return apps
}

// A notification receiver that never answers must not turn a clean stop
// into a failed one: the undelivered notification is logged and the
// process still exits 0 within its shutdown timeout.
func TestSIGTERMWithANotificationSinkThatNeverAnswersStillExitsZeroInTime(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "stopdead")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", map[string]string{"deploy/docker-compose.yml": neverHealthy})
	release := make(chan struct{})
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); sink.Close() })
	apps := waitingAppsNotifying(t, stack, repo.Dir, sink.URL)
	c := startController(t, apps, stack, nil, "--listen", "", "--shutdown-timeout", "4s")
	swarmtest.Eventually(t, 60*time.Second, func() (bool, string) {
		_, err := swarmtest.Client(t).ServiceInspect(context.Background(), stack+"_web", client.ServiceInspectOptions{})
		return err == nil, fmt.Sprint(err)
	})
	code, took := c.stop(syscall.SIGTERM, 8*time.Second)
	if code != 0 || took > 5*time.Second {
		t.Fatalf("exit status %d after %s, want 0 within the 4s shutdown timeout", code, took)
	}
	if log := c.logs.String(); !strings.Contains(log, "stopping without sending every notification") {
		t.Fatalf("no log line names the notifications left unsent:\n%s", log)
	}
}
