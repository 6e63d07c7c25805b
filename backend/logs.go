package backend

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/flotilla-gitops/flotilla/capability"
)

var _ capability.ServiceLogs = (*Backend)(nil)

// ServiceLogTail reads the last lines the tasks of service id wrote, stdout
// and stderr together, oldest first. The reconciler asks only about its own
// stack's hook jobs, and redacts what it knows to be secret before the lines
// reach a status or an event.
func (b *Backend) ServiceLogTail(ctx context.Context, id string, lines int) ([]string, error) {
	if lines < 1 {
		return nil, nil
	}
	rc, err := b.api.ServiceLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(lines)})
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
