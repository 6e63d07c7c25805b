package capability

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flotilla-gitops/flotilla/charts"
)

// ServiceLogs reads the last lines a service's tasks wrote. It is how a hook
// job that failed explains itself: the lines go into the application's
// status, the event and the notification. Without it a failed hook is still
// a failed sync, reported with its task's error but without its output.
//
// This one is Flotilla's own addition to the seed's set.
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
	return nil, fmt.Errorf("%w: %w", Lost[ServiceLogs](), errors.ErrUnsupported)
}

// LogQuery narrows and bounds a read of a stack's logs.
type LogQuery struct {
	// Service is an unscoped service name; "" reads every service.
	Service string
	// Task is a task id; "" reads every task of the services chosen.
	Task string
	// Tail is how many of the last lines of each service to start with.
	Tail int
	// Follow keeps reading new lines until the context ends.
	Follow bool
	// Timestamps asks the daemon for each line's time.
	Timestamps bool
}

// LogLine is one line a task wrote.
type LogLine struct {
	Service string    // unscoped service name
	Task    string    // task id
	Node    string    // node id
	Time    time.Time // zero without LogQuery.Timestamps
	Text    string
}

// StackLogs streams what the tasks of a stack's services write, one line at
// a time through emit, which may stop the read by returning an error. It is
// how an operator reads an application's logs through the controller
// without a client of the swarm's own. Without it the logs route answers
// that the backend cannot read them; hook logs need only ServiceLogs.
//
// This one is Flotilla's own addition to the seed's set.
type StackLogs interface {
	StackLogs(ctx context.Context, stack string, q LogQuery, emit func(LogLine) error) error
}

// StreamLogs streams the logs of stack's tasks. If b implements StackLogs
// they are read from it; otherwise the error wraps errors.ErrUnsupported and
// says which capability is missing.
func StreamLogs(ctx context.Context, b charts.Backend, stack string, q LogQuery, emit func(LogLine) error) error {
	if l, ok := As[StackLogs](b); ok {
		return l.StackLogs(ctx, stack, q, emit)
	}
	return fmt.Errorf("%w: %w", Lost[StackLogs](), errors.ErrUnsupported)
}

// ErrNoLogSource is wrapped by StackLogs when the service or task asked for
// is not part of the stack.
var ErrNoLogSource = errors.New("no such service or task in the stack")
