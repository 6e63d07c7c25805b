package backend

import (
	"context"
	"fmt"
	"sync"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// nodeNames remembers the hostname of every node a read has seen a task
// on, and Swarm's task history retention limit, so that a steady read
// names nodes without listing them: node ids do not change, so only a task
// on a node not seen before costs a node listing (and one swarm inspect).
// Copies of a Backend share one.
type nodeNames struct {
	mu    sync.Mutex
	names map[string]string // node id to hostname; "" for an id no listing had
	// retention is the swarm's task history retention limit: how many
	// tasks of one slot Swarm keeps, the running one included. 0 unknown.
	retention int64
}

func newNodeNames() *nodeNames { return &nodeNames{names: map[string]string{}} }

// unknown reports whether a task names a node no listing has answered for.
func (c *nodeNames) unknown(tasks map[string][]swarm.Task) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ts := range tasks {
		for _, t := range ts {
			if _, ok := c.names[t.NodeID]; t.NodeID != "" && !ok {
				return true
			}
		}
	}
	return false
}

// learn records the hostnames of a node listing, and marks the ids tasks
// named that the listing lacks (nodes since removed) so they do not make
// every later read list nodes again.
func (c *nodeNames) learn(nodes []swarm.Node, tasks map[string][]swarm.Task, retention int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range nodes {
		c.names[n.ID] = n.Description.Hostname
	}
	for _, ts := range tasks {
		for _, t := range ts {
			if _, ok := c.names[t.NodeID]; t.NodeID != "" && !ok {
				c.names[t.NodeID] = ""
			}
		}
	}
	if retention > 0 {
		c.retention = retention
	}
}

// lookup returns a node's hostname, empty when not known, and the
// retention limit.
func (c *nodeNames) lookup(id string) string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names[id]
}

func (c *nodeNames) retentionLimit() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retention
}

// refreshNodeNames lists nodes (when the read did not already) and inspects
// the swarm for its retention limit, when a task runs on a node the cache
// does not know. A failure only leaves nodes unnamed: it is logged, never
// an error of the read.
func (b *Backend) refreshNodeNames(ctx context.Context, listed []swarm.Node, tasks map[string][]swarm.Task) {
	if !b.nodes.unknown(tasks) {
		return
	}
	if listed == nil {
		list, err := b.api.NodeList(ctx, client.NodeListOptions{})
		if err != nil {
			b.log.Warn("nodes unlisted; tasks show node ids", "error", fmt.Errorf("list nodes: %w", err))
			return
		}
		listed = list.Items
	}
	var retention int64
	if sw, err := b.api.SwarmInspect(ctx, client.SwarmInspectOptions{}); err != nil {
		b.log.Warn("swarm uninspected; restart counts are not known to be complete", "error", fmt.Errorf("inspect swarm: %w", err))
	} else if sw.Swarm.Spec.Orchestration.TaskHistoryRetentionLimit != nil {
		retention = *sw.Swarm.Spec.Orchestration.TaskHistoryRetentionLimit
	}
	b.nodes.learn(listed, tasks, retention)
}

// restarts counts, for each task Swarm wants running, the earlier tasks of
// its slot (its node, for a global service) still in the listing: each is a
// task that exited, failed or was replaced by an update. full says the
// count reached what Swarm keeps, so there may have been more.
func restarts(t swarm.Task, tasks []swarm.Task, retention int64) (n int, full bool) {
	if t.DesiredState != swarm.TaskStateRunning {
		return 0, false
	}
	key := func(x swarm.Task) string {
		if x.Slot == 0 {
			return "node " + x.NodeID
		}
		return fmt.Sprint("slot ", x.Slot)
	}
	k := key(t)
	for _, o := range tasks {
		if o.ID != t.ID && key(o) == k && (o.DesiredState == swarm.TaskStateShutdown || o.DesiredState == swarm.TaskStateRemove) {
			n++
		}
	}
	return n, retention > 0 && int64(n) >= retention-1
}
