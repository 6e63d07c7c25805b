package reconcile

import "slices"

// Running names the applications whose pass is in flight, sorted: what a
// stopping controller is still waiting for.
func (c *Controller) Running() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name, a := range c.apps {
		if a.running {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
