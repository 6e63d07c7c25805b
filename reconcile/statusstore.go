package reconcile

import (
	"slices"

	"github.com/flotilla-gitops/flotilla/application"
)

// The status store: each application's last status, as the API, the CLI
// and the console read it between passes.

// InitialPassesDone reports whether every application has finished at least
// one pass since the controller started, successful or not.
func (c *Controller) InitialPassesDone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.apps {
		if a.status.LastPass.IsZero() {
			return false
		}
	}
	return true
}

// Status returns the application's last published status.
func (c *Controller) Status(name string) (application.Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	if !ok {
		return application.Status{}, false
	}
	return a.published(), true
}

// Statuses returns every application's status, sorted by name.
func (c *Controller) Statuses() []application.Status {
	c.mu.Lock()
	out := make([]application.Status, 0, len(c.apps))
	for _, a := range c.apps {
		out = append(out, a.published())
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b application.Status) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
