package reconcile

import (
	"context"
	"fmt"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/redact"
)

// Logs streams what the tasks of the application's stack write, read
// through the backend of the application's own destination. Each line is
// stripped of URL credentials before emit sees it, as hook logs are. The
// values of the application's own secrets are blanked by the caller with
// LogMask, which reproduces them; this holds none.
func (c *Controller) Logs(ctx context.Context, name string, q capability.LogQuery, emit func(capability.LogLine) error) error {
	app, err := c.application(name)
	if err != nil {
		return err
	}
	b, err := c.backendOf(application.Application{Destination: app.Destination})
	if err != nil {
		return fmt.Errorf("application %q: %w", name, err)
	}
	err = capability.StreamLogs(ctx, b, app.Stack, q, func(l capability.LogLine) error {
		l.Text = redact.Text(l.Text)
		return emit(l)
	})
	if err != nil {
		return fmt.Errorf("application %q: %w", name, err)
	}
	return nil
}
