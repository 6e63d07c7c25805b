// Package renderbox renders a chart in a child process, so that a
// template which runs away (a loop no budget sees, an allocation no
// estimate foresaw) costs that one render, never the controller.
//
// The child is the controller's own binary, started again with EnvMode
// set: it sets its own address-space and CPU limits, reads one request on
// stdin and writes the result on stdout. The parent kills the child's
// process group at a wall-clock deadline and bounds what it reads back.
// Decryption and dependency fetches stay in the parent, answered over the
// same pipes, so the child holds no keys or credentials.
package renderbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/compose"
)

// Defaults for Limits.
const (
	DefaultMemory    int64 = 2 << 30
	DefaultDeadline        = 60 * time.Second
	DefaultMaxOutput int64 = 256 << 20
)

// ErrLimit marks a render the child process could not finish within one
// of its limits: deadline, memory, CPU time or output size.
var ErrLimit = errors.New("render limit")

// Limits bound one render child.
type Limits struct {
	// Memory is the address space, in bytes, the render may add to what
	// the child starts with (RLIMIT_AS is set to the sum). Default
	// DefaultMemory; -1 for none.
	Memory int64
	// Deadline is the wall clock one render may take before its process
	// group is killed; the child's CPU time limit is the same. Default
	// DefaultDeadline.
	Deadline time.Duration
	// MaxOutput is the most the parent reads from the child. Default
	// DefaultMaxOutput.
	MaxOutput int64
}

func (l Limits) withDefaults() Limits {
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.Deadline <= 0 {
		l.Deadline = DefaultDeadline
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	return l
}

// Box starts render children.
type Box struct {
	exe    string
	limits Limits
}

// New returns a Box that starts this process's own executable as the
// child; that binary's main must call Main first.
func New(l Limits) (*Box, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("render box: finding the controller's executable: %w", err)
	}
	return &Box{exe: exe, limits: l.withDefaults()}, nil
}

// Limits reports the limits the box applies, defaults filled in.
func (b *Box) Limits() Limits { return b.limits }

// Job is one chart render.
type Job struct {
	// Chart names the chart in messages: its name, or directory.
	Chart string
	Dir   chartengine.Dir
	// Release is the release rendered for.
	Release chartengine.Release
	// Recorded, when not nil, is the newest release's manifest: a render
	// that differs from it is done again as the next revision.
	Recorded *string
}

// RenderInProcess renders j in this process, as Render does in a child:
// for callers that chose not to isolate, and for comparison.
func RenderInProcess(j Job) (*chartengine.Rendered, error) {
	rec, has := "", j.Recorded != nil
	if has {
		rec = *j.Recorded
	}
	return renderRelease(j.Dir, j.Release, rec, has)
}

// Render renders j in a child process. A child that passes a limit, or
// dies, is an error wrapping ErrLimit that names the chart and the limit.
func (b *Box) Render(ctx context.Context, j Job) (*chartengine.Rendered, error) {
	l := b.limits
	d := j.Dir
	req := request{
		Root: d.Root, Path: d.Path, ValueFiles: d.ValueFiles, ExtraValueFiles: d.ExtraValueFiles,
		Values: d.Values, Set: d.Set, SealKey: d.SealKey, Limits: d.Limits, APIVersion: d.APIVersion,
		HasDecrypt: d.Decrypt != nil, HasResolve: d.Resolve != nil, HasSecretRef: d.SecretRef != nil,
		Release: j.Release, Memory: max(l.Memory, 0), CPU: l.Deadline,
	}
	if j.Recorded != nil {
		req.Recorded, req.HasRecorded = *j.Recorded, true
	}

	cmd := exec.CommandContext(ctx, b.exe)
	cmd.Env = []string{EnvMode + "=1", "GOTRACEBACK=none"}
	cmd.Dir = "/"
	// No Pdeathsig: it fires when the starting OS thread ends, which the Go
	// runtime may do at any time. A child whose parent dies exits within a
	// second (watchParent), and its CPU limit ends it in any case.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The child may have started others: kill its whole group.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 2 * time.Second
	stderr := &headBuffer{max: 8 << 10}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("render box: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("render box: %w", err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("render box: starting the render process: %w", err)
	}
	// The deadline counts the child's own time only: while the parent
	// decrypts or fetches a dependency for it, its clock stops, so a slow
	// chart repository is not mistaken for a runaway template.
	clock := startClock(l.Deadline, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer clock.t.Stop()
	out := &capped{r: bufio.NewReader(stdout), left: l.MaxOutput}
	res, talkErr := converse(stdin, out, req, d, clock)
	stdin.Close()
	if talkErr != nil {
		// Do not wait for a child that is still running: it has broken
		// the protocol or passed the output bound.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	waitErr := cmd.Wait()
	if res != nil && waitErr == nil {
		if res.Err != nil {
			return nil, res.Err.err()
		}
		return &chartengine.Rendered{
			Rendered:     &compose.Rendered{Manifest: res.Manifest, Secrets: res.Secrets, Sealed: res.Sealed, Refs: res.Refs, Warnings: res.Warnings},
			Chart:        res.Chart,
			ValuesDigest: res.ValuesDigest,
		}, nil
	}
	return nil, b.failure(ctx, clock.fired.Load(), j.Chart, time.Since(began), out, stderr, talkErr, waitErr)
}

// converse sends the request, answers the child's calls, and returns its
// result.
func converse(stdin io.Writer, stdout io.Reader, req request, d chartengine.Dir, clock *clock) (*result, error) {
	bw := bufio.NewWriter(stdin)
	enc := gob.NewEncoder(bw)
	dec := gob.NewDecoder(stdout)
	if err := enc.Encode(req); err != nil {
		return nil, fmt.Errorf("sending the request: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("sending the request: %w", err)
	}
	for {
		var m up
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("reading from the render process: %w", err)
		}
		var reply down
		if m.Call != "" {
			clock.pause()
		}
		switch m.Call {
		case "":
			if m.Result == nil {
				return nil, errNoResult
			}
			return m.Result, nil
		case "decrypt":
			if d.Decrypt == nil {
				return nil, fmt.Errorf("the render process asked to decrypt %s without a decrypter", m.File)
			}
			data, err := d.Decrypt(m.File, m.Data)
			reply = down{Data: data, Err: toWire(err)}
		case "secretRef":
			// The store is read here, in the parent, under the
			// application's grants; the child gets the value for the
			// compose render only.
			if d.SecretRef == nil {
				return nil, fmt.Errorf("the render process asked for a secret store value without a resolver")
			}
			data, tag, err := d.SecretRef(m.Use, m.Ref)
			reply = down{Data: data, Tag: tag, Err: toWire(err)}
		case "resolve":
			if d.Resolve == nil {
				return nil, fmt.Errorf("the render process asked to resolve %s without a resolver", m.Name)
			}
			root, dir, origin, err := resolveTo(d.Resolve, m.Repo, m.Name, m.Constraint)
			reply = down{Root: root, Dir: dir, Origin: origin, Err: toWire(err)}
		default:
			return nil, fmt.Errorf("the render process made an unknown call %q", m.Call)
		}
		if !clock.resume() {
			return nil, errors.New("the render deadline passed")
		}
		if err := enc.Encode(reply); err != nil {
			return nil, fmt.Errorf("answering the render process: %w", err)
		}
		if err := bw.Flush(); err != nil {
			return nil, fmt.Errorf("answering the render process: %w", err)
		}
	}
}

// resolveTo asks resolve for a dependency and reports where the fetched
// chart lies, for the child to load it there itself.
func resolveTo(resolve chartengine.Resolver, repo, name, constraint string) (root, dir, origin string, err error) {
	c, err := resolve(repo, name, constraint)
	if err != nil {
		return "", "", "", err
	}
	root, dir, origin = c.Fetched()
	if root == "" {
		return "", "", "", fmt.Errorf("dependency %s from %s: the resolver gave a chart with no directory", name, repo)
	}
	return root, dir, origin, nil
}

// failure explains a child that gave no result.
func (b *Box) failure(ctx context.Context, timedOut bool, chart string, took time.Duration, out *capped, stderr *headBuffer, talkErr, waitErr error) error {
	l := b.limits
	what := fmt.Sprintf("chart %s", chart)
	if timedOut {
		return fmt.Errorf("%w: %s: render deadline of %s exceeded; its render process was killed (a template loop that does not end?)", ErrLimit, what, l.Deadline)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("render box: %s: %w", what, ctx.Err())
	}
	if out.over {
		return fmt.Errorf("%w: %s: the render's output passed %d MiB; its render process was killed", ErrLimit, what, l.MaxOutput>>20)
	}
	msg := stderr.String()
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// The soft CPU limit signals SIGXCPU, the hard one kills
			// outright; the child's own CPU time tells the hard one from
			// the memory limit's kill.
			cpu := ee.UserTime() + ee.SystemTime()
			sig := ws.Signal()
			if sig == syscall.SIGXCPU || sig == syscall.SIGKILL && cpu >= l.Deadline {
				return fmt.Errorf("%w: %s: render CPU time limit of %s exceeded (%s used); its render process was killed (a template loop that does not end?)", ErrLimit, what, l.Deadline, cpu.Round(time.Millisecond))
			}
			if sig == syscall.SIGKILL {
				return fmt.Errorf("%w: %s: the render process was killed after %s (memory limit %d MiB or CPU time limit %s)", ErrLimit, what, took.Round(time.Millisecond), l.Memory>>20, l.Deadline)
			}
		}
	}
	if memoryFailure(msg) {
		return fmt.Errorf("%w: %s: render memory limit of %d MiB exceeded; its render process died", ErrLimit, what, l.Memory>>20)
	}
	cause := waitErr
	if cause == nil {
		cause = talkErr
	}
	if first := firstLine(msg); first != "" {
		return fmt.Errorf("%w: %s: the render process failed: %v: %s", ErrLimit, what, cause, first)
	}
	return fmt.Errorf("%w: %s: the render process failed: %v", ErrLimit, what, cause)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// clock is a render's deadline, which can stop while the parent works
// for the child. Only the goroutine talking to the child uses pause and
// resume.
type clock struct {
	t       *time.Timer
	left    time.Duration
	started time.Time
	fired   atomic.Bool
}

func startClock(d time.Duration, fire func()) *clock {
	c := &clock{left: d, started: time.Now()}
	c.t = time.AfterFunc(d, func() {
		c.fired.Store(true)
		fire()
	})
	return c
}

// pause stops the clock, keeping what is left.
func (c *clock) pause() {
	if c.t.Stop() {
		c.left -= time.Since(c.started)
	}
}

// resume starts the clock again with what was left; false if it had
// already run out.
func (c *clock) resume() bool {
	if c.fired.Load() {
		return false
	}
	c.started = time.Now()
	c.t.Reset(max(c.left, 0))
	return true
}

// capped reads at most left bytes, then fails and remembers it.
type capped struct {
	r    io.Reader
	left int64
	over bool
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.over = true
		return 0, fmt.Errorf("%w: output bound", ErrLimit)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// headBuffer keeps the first max bytes written to it: the runtime's fatal
// error comes first, and a dying child's goroutine dump after it could be
// long.
type headBuffer struct {
	bytes.Buffer
	max int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	if room := h.max - h.Len(); room > 0 {
		h.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// memoryFailures are what a child says when its address-space limit stops an
// allocation: the Go runtime's and the kernel's words, and the race
// detector's, whose runtime (in a -race build, as the e2e suite runs) fails
// to map its shadow memory under the same limit.
var memoryFailures = []string{"out of memory", "cannot allocate memory", "failed to allocate", "too many address space collisions"}

func memoryFailure(stderr string) bool {
	for _, m := range memoryFailures {
		if strings.Contains(stderr, m) {
			return true
		}
	}
	return false
}
