package api

import (
	"container/list"
	"sync"
	"time"
)

// replayCache remembers recent deliveries so a replay is refused. Every
// entry lives for the same window, so the oldest entry is always the first
// to expire and a list in arrival order serves both expiry and the size
// bound, evicting oldest first.
type replayCache struct {
	mu     sync.Mutex
	size   int
	window time.Duration
	order  *list.List // of *replayEntry, oldest first
	index  map[string]*list.Element
}

// replayEntry is one delivery: its keys (id and body digest) and when it
// arrived.
type replayEntry struct {
	keys []string
	at   time.Time
}

func newReplayCache(size int, window time.Duration) *replayCache {
	return &replayCache{size: size, window: window, order: list.New(), index: map[string]*list.Element{}}
}

// claim records a delivery known by keys at now, unless one of its keys was
// seen within the window. release forgets the delivery again, for one whose
// handling failed on this side and which the sender may retry.
func (c *replayCache) claim(now time.Time, keys ...string) (release func(), fresh bool) {
	if len(keys) == 0 {
		return func() {}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.order.Front(); e != nil && now.Sub(e.Value.(*replayEntry).at) >= c.window; e = c.order.Front() {
		c.remove(e)
	}
	for _, k := range keys {
		if _, ok := c.index[k]; ok {
			return func() {}, false
		}
	}
	for c.order.Len() >= c.size {
		c.remove(c.order.Front())
	}
	e := c.order.PushBack(&replayEntry{keys: keys, at: now})
	for _, k := range keys {
		c.index[k] = e
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.index[keys[0]] == e {
			c.remove(e)
		}
	}, true
}

func (c *replayCache) remove(e *list.Element) {
	for _, k := range e.Value.(*replayEntry).keys {
		if c.index[k] == e {
			delete(c.index, k)
		}
	}
	c.order.Remove(e)
}

// len returns how many deliveries are remembered.
func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
