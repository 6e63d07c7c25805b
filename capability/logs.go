package capability

import (
	"context"
	"errors"
	"fmt"

	"github.com/flotilla-gitops/flotilla/charts"
)

// ServiceLogs reads the last lines a service's tasks wrote. It is how a hook
// job that failed explains itself: the lines go into the application's
// status, the event and the notification. Without it a failed hook is still
// a failed sync, reported with its task's error but without its output.
type ServiceLogs interface {
	ServiceLogTail(ctx context.Context, id string, lines int) ([]string, error)
}

// LogTail returns the last lines of service id's output. If b implements
// ServiceLogs they are read from it; otherwise the error wraps
// errors.ErrUnsupported and says which capability is missing.
func LogTail(ctx context.Context, b charts.Backend, id string, lines int) ([]string, error) {
	if l, ok := As[ServiceLogs](b); ok {
		return l.ServiceLogTail(ctx, id, lines)
	}
	return nil, fmt.Errorf("%w: %w", &ErrUnavailable{Feature: "hook logs", Capability: "ServiceLogs"}, errors.ErrUnsupported)
}
