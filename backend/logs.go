package backend

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/capability"
)

// ServiceLogTail reads the last lines the tasks of service id wrote, stdout
// and stderr together, oldest first. The reconciler asks only about its own
// stack's hook jobs, and redacts what it knows to be secret before the lines
// reach a status or an event.
func (b *Backend) ServiceLogTail(ctx context.Context, id string, lines int) ([]string, error) {
	if lines < 1 {
		return nil, nil
	}
	rc, err := b.api.ServiceLogs(ctx, id, client.ServiceLogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(lines)})
	if err != nil {
		return nil, fmt.Errorf("read logs of service %s: %w", id, err)
	}
	defer rc.Close()
	var out bytes.Buffer
	// A service without a TTY multiplexes both streams into one.
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		return nil, fmt.Errorf("read logs of service %s: %w", id, err)
	}
	all := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(all) == 1 && all[0] == "" {
		return nil, nil
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return all, nil
}

// logSource is one stream of a stack's logs: a service's or one task's.
type logSource struct {
	service string // unscoped
	id      string
	task    bool
}

// StackLogs reads the logs of a stack's services, or of one of them, or of
// one task, through the daemon's service (or task) logs endpoint, one
// reader per service, and hands each line to emit from this goroutine only.
// It returns once every reader has ended: at the end of the logs, or, when
// following, once ctx ends or emit fails.
func (b *Backend) StackLogs(ctx context.Context, stack string, q capability.LogQuery, emit func(capability.LogLine) error) error {
	srcs, err := b.logSources(ctx, stack, q)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := make(chan capability.LogLine)
	errs := make(chan error, len(srcs))
	var wg sync.WaitGroup
	for _, s := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.readLogs(ctx, s, q, lines)
		}()
	}
	go func() { wg.Wait(); close(lines) }()
	var first error
	for l := range lines {
		if first != nil {
			continue // draining until every reader has seen the cancel
		}
		if err := emit(l); err != nil {
			first = err
			cancel()
		}
	}
	close(errs)
	if first != nil {
		return first
	}
	for err := range errs {
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// logSources resolves the query to the services or task to read, refusing
// any that is not the stack's own.
func (b *Backend) logSources(ctx context.Context, stack string, q capability.LogQuery) ([]logSource, error) {
	list, err := b.api.ServiceList(ctx, client.ServiceListOptions{Filters: namespace(stack)})
	if err != nil {
		return nil, fmt.Errorf("logs of %s: list services: %w", stack, err)
	}
	byID := map[string]string{}
	var srcs []logSource
	for _, s := range list.Items {
		name := strings.TrimPrefix(s.Spec.Name, stack+"_")
		if q.Service != "" && name != q.Service {
			continue
		}
		byID[s.ID] = name
		srcs = append(srcs, logSource{service: name, id: s.ID})
	}
	if q.Service != "" && len(srcs) == 0 {
		return nil, fmt.Errorf("logs of %s: service %q: %w", stack, q.Service, capability.ErrNoLogSource)
	}
	if q.Task == "" {
		slices.SortFunc(srcs, func(a, b logSource) int { return strings.Compare(a.service, b.service) })
		return srcs, nil
	}
	t, err := b.api.TaskInspect(ctx, q.Task, client.TaskInspectOptions{})
	if isNotFound(err) {
		return nil, fmt.Errorf("logs of %s: task %q: %w", stack, q.Task, capability.ErrNoLogSource)
	}
	if err != nil {
		return nil, fmt.Errorf("logs of %s: inspect task %s: %w", stack, q.Task, err)
	}
	name, ok := byID[t.Task.ServiceID]
	if !ok {
		return nil, fmt.Errorf("logs of %s: task %q: %w", stack, q.Task, capability.ErrNoLogSource)
	}
	return []logSource{{service: name, id: t.Task.ID, task: true}}, nil
}

// maxLogLine bounds one line; a longer one is cut there.
const maxLogLine = 64 << 10

// readLogs copies one source's lines to out until it ends or ctx does.
func (b *Backend) readLogs(ctx context.Context, s logSource, q capability.LogQuery, out chan<- capability.LogLine) error {
	opts := client.ServiceLogsOptions{ShowStdout: true, ShowStderr: true, Follow: q.Follow, Timestamps: q.Timestamps,
		Details: true, Tail: strconv.Itoa(max(q.Tail, 0))}
	var rc io.ReadCloser
	var err error
	if s.task {
		rc, err = b.api.TaskLogs(ctx, s.id, client.TaskLogsOptions(opts))
	} else {
		rc, err = b.api.ServiceLogs(ctx, s.id, opts)
	}
	if err != nil {
		return fmt.Errorf("read logs of service %s: %w", s.service, err)
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() {
		// A service without a TTY multiplexes both streams into one.
		_, err := stdcopy.StdCopy(pw, pw, rc)
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 0, 4096), maxLogLine)
	for sc.Scan() {
		l := parseLogLine(sc.Text(), q.Timestamps)
		l.Service = s.service
		select {
		case out <- l:
		case <-ctx.Done():
			return nil
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("read logs of service %s: %w", s.service, err)
	}
	return nil
}

// parseLogLine splits the daemon's "[time ]details text" form, where
// details are comma-separated key=value pairs naming node, service and task.
func parseLogLine(raw string, timestamps bool) capability.LogLine {
	var l capability.LogLine
	if timestamps {
		ts, rest, _ := strings.Cut(raw, " ")
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			l.Time, raw = t, rest
		}
	}
	details, text, ok := strings.Cut(raw, " ")
	if !ok || !strings.Contains(details, "com.docker.swarm.") {
		l.Text = raw
		return l
	}
	for _, kv := range strings.Split(details, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if u, err := url.QueryUnescape(v); err == nil {
			v = u
		}
		switch k {
		case "com.docker.swarm.task.id":
			l.Task = v
		case "com.docker.swarm.node.id":
			l.Node = v
		}
	}
	l.Text = text
	return l
}
