package renderbox

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flotilla-gitops/flotilla/chartengine"
	"github.com/flotilla-gitops/flotilla/compose"
)

// EnvMode selects the child mode: a process started with EnvMode=1 in
// its environment is a render child, not the command it was built as.
const EnvMode = "FLOTILLA_RENDERBOX"

// Main turns the process into a render child when EnvMode says so, and
// then never returns; otherwise it returns at once. The controller's main
// (and the TestMain of every test binary that renders through a Box)
// calls it first, before flags or anything else runs.
func Main() {
	if os.Getenv(EnvMode) != "1" {
		return
	}
	go watchParent(os.Getppid(), time.Second, func() { os.Exit(4) })
	os.Exit(child(os.Stdin, os.Stdout))
}

// watchParent calls gone once the process that started this one is no
// longer its parent: a controller killed outright (SIGKILL, OOM) cannot
// stop its child, which would otherwise run on, orphaned, until its CPU
// limit. Swarm managers restart a killed controller, and each restart
// would leave one more. The runtime preempts a runaway template, so the
// check runs whatever the render does.
func watchParent(parent int, every time.Duration, gone func()) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for range tick.C {
		if os.Getppid() != parent {
			gone()
			return
		}
	}
}

// child serves one request: it sets its own limits, renders, and writes
// the result. Exit status 0 means a result (which may be a refusal) was
// written; anything else is a failure the parent explains.
func child(in io.Reader, out io.Writer) int {
	dec := gob.NewDecoder(bufio.NewReader(in))
	bw := bufio.NewWriter(out)
	enc := gob.NewEncoder(bw)
	var req request
	if err := dec.Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "renderbox: reading the request:", err)
		return 3
	}
	if err := setLimits(req.Memory, req.CPU); err != nil {
		fmt.Fprintln(os.Stderr, "renderbox:", err)
		return 3
	}
	call := func(m up) (down, error) {
		if err := enc.Encode(m); err != nil {
			return down{}, err
		}
		if err := bw.Flush(); err != nil {
			return down{}, err
		}
		var d down
		if err := dec.Decode(&d); err != nil {
			return down{}, fmt.Errorf("renderbox: reading the reply to %s: %w", m.Call, err)
		}
		return d, nil
	}
	res := render(req, call)
	if err := enc.Encode(up{Result: res}); err != nil {
		fmt.Fprintln(os.Stderr, "renderbox: writing the result:", err)
		return 3
	}
	if err := bw.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "renderbox: writing the result:", err)
		return 3
	}
	return 0
}

// setLimits bounds the child's address space and CPU time, so a render
// that outgrows them is killed by the kernel or dies of the runtime's
// out-of-memory error, in this process only. The Go runtime reserves well
// over a GiB of address space it never touches before main runs, so the
// memory limit is what the render may add to the address space the child
// starts with. The soft memory limit makes the collector work hard before
// that.
func setLimits(memory int64, cpu time.Duration) error {
	if memory > 0 {
		base, err := addressSpace()
		if err != nil {
			return err
		}
		as := uint64(base + memory)
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
			return fmt.Errorf("setting the address-space limit to %d bytes: %w", as, err)
		}
		debug.SetMemoryLimit(memory * 3 / 4)
	}
	if cpu > 0 {
		secs := uint64((cpu + time.Second - 1) / time.Second)
		if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: secs, Max: secs + 1}); err != nil {
			return fmt.Errorf("setting the CPU time limit to %ds: %w", secs, err)
		}
	}
	return nil
}

// addressSpace is this process's virtual memory size in bytes (VmSize).
func addressSpace() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading the address-space size: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading the address-space size: %q: %w", l, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("reading the address-space size: no VmSize in /proc/self/status")
}

// render runs the chart engine as reconcile would in process, its
// decryption and dependency resolution answered by the parent.
func render(req request, call func(up) (down, error)) *result {
	d := chartengine.Dir{
		Root:            req.Root,
		Path:            req.Path,
		ValueFiles:      req.ValueFiles,
		ExtraValueFiles: req.ExtraValueFiles,
		Values:          req.Values,
		Set:             req.Set,
		SealKey:         req.SealKey,
		Limits:          req.Limits,
		APIVersion:      req.APIVersion,
	}
	if req.HasDecrypt {
		d.Decrypt = func(file string, data []byte) ([]byte, error) {
			r, err := call(up{Call: "decrypt", File: file, Data: data})
			if err != nil {
				return nil, err
			}
			return r.Data, r.Err.err()
		}
	}
	if req.HasResolve {
		d.Resolve = func(repo, name, constraint string) (*chartengine.Chart, error) {
			r, err := call(up{Call: "resolve", Repo: repo, Name: name, Constraint: constraint})
			if err != nil {
				return nil, err
			}
			if r.Err != nil {
				return nil, r.Err.err()
			}
			return chartengine.LoadFetched(r.Root, r.Dir, r.Origin)
		}
	}
	if req.HasSecretRef {
		d.SecretRef = func(use string, ref compose.SecretRef) ([]byte, string, error) {
			r, err := call(up{Call: "secretRef", Use: use, Ref: ref})
			if err != nil {
				return nil, "", err
			}
			return r.Data, r.Tag, r.Err.err()
		}
	}
	r, err := renderRelease(d, req.Release, req.Recorded, req.HasRecorded)
	if err != nil {
		return &result{Err: toWire(err)}
	}
	return &result{
		Manifest: r.Manifest, Secrets: r.Secrets, Sealed: r.Sealed, Refs: r.Refs, Warnings: r.Warnings,
		Chart: r.Chart, ValuesDigest: r.ValuesDigest,
	}
}

// renderRelease renders d for rel and, when recorded is given and the
// manifest differs from it, again for the next revision: a template may
// print .Release.Revision, and only a change is a new revision.
func renderRelease(d chartengine.Dir, rel chartengine.Release, recorded string, hasRecorded bool) (*chartengine.Rendered, error) {
	c, err := chartengine.Load(d.Root, d.Path)
	if err != nil {
		return nil, err
	}
	r, err := c.Render(d, rel)
	if err != nil {
		return nil, err
	}
	if hasRecorded && r.Manifest != recorded {
		rel.Revision++
		return c.Render(d, rel)
	}
	return r, nil
}

var errNoResult = errors.New("the render process ended without a result")
