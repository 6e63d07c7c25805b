package notify

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
)

// sink is one configured destination: its filter, its template, its queue
// and its delivery state.
type sink struct {
	d       *Dispatcher
	name    string
	kind    application.NotificationType
	urlFile string
	urlEnv  string
	headers []application.Header

	types    map[events.Type]bool
	services bool
	apps     map[string]bool // nil: every application
	tmpl     *template.Template
	fallback *template.Template // the type's default, for a template that fails on real data

	mu     sync.Mutex
	queue  []events.Event
	unwarn int           // drops not yet logged
	busy   bool          // an event popped is being handled
	wake   chan struct{} // one pending signal: the queue may be non-empty

	// Owned by the sink's goroutine.
	seen map[dedupKey]*dedupEntry

	delivered, failed, dropped, suppressed atomic.Uint64
}

func newSink(n application.Notification, d *Dispatcher) (*sink, error) {
	if n.Template == "" {
		n.Template = n.Type.DefaultTemplate()
	}
	if len(n.Events) == 0 {
		n.Events = application.NotificationEvents()
	}
	switch n.Type {
	case application.NotifySlack, application.NotifyWebhook:
	default:
		return nil, fmt.Errorf("type %q is not slack or webhook", n.Type)
	}
	switch {
	case (n.URLFile == "") == (n.URLEnv == ""):
		return nil, errors.New("exactly one of urlFile and urlEnv is required")
	case n.URLFile != "" && !path.IsAbs(n.URLFile):
		return nil, errors.New("urlFile must be an absolute path")
	}
	tmpl, err := n.ParseTemplate()
	if err != nil {
		return nil, err
	}
	def := application.Notification{Name: n.Name, Template: n.Type.DefaultTemplate()}
	fallback, err := def.ParseTemplate()
	if err != nil {
		return nil, fmt.Errorf("default template: %w", err) // a bug in this build
	}
	s := &sink{
		d: d, name: n.Name, kind: n.Type, urlFile: n.URLFile, urlEnv: n.URLEnv,
		headers:  n.Headers,
		types:    map[events.Type]bool{},
		services: n.Services,
		tmpl:     tmpl,
		fallback: fallback,
		wake:     make(chan struct{}, 1),
		seen:     map[dedupKey]*dedupEntry{},
	}
	for _, t := range n.Events {
		s.types[t] = true
	}
	if len(n.Applications) > 0 {
		s.apps = map[string]bool{}
		for _, a := range n.Applications {
			s.apps[a] = true
		}
	}
	return s, nil
}

// wants reports whether e passes the sink's filters. Per-service progress
// is a health.changed event with Service set; it passes only with services
// enabled, because a rollout publishes one for every task that moves.
func (s *sink) wants(e events.Event) bool {
	if e.Type.Marker() || !s.types[e.Type] {
		return false
	}
	if e.Type == events.HealthChanged && e.Service != "" && !s.services {
		return false
	}
	return s.apps == nil || s.apps[e.App]
}

// push queues e without ever waiting: when the queue is full the oldest
// notification makes room, since the newest says most about the present.
func (s *sink) push(e events.Event) {
	s.mu.Lock()
	if len(s.queue) >= s.d.opts.QueueSize {
		s.queue[0] = events.Event{} // let the dropped event's Data go
		s.queue = s.queue[1:]
		s.unwarn++
		s.dropped.Add(1)
	}
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pop takes the oldest queued event, and the number of drops to report.
func (s *sink) pop() (e events.Event, ok bool, drops int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	drops, s.unwarn = s.unwarn, 0
	if len(s.queue) == 0 {
		return events.Event{}, false, drops
	}
	e = s.queue[0]
	s.queue[0] = events.Event{}
	s.queue = s.queue[1:]
	s.busy = true
	return e, true, drops
}

// run delivers queued notifications one at a time until ctx ends.
func (s *sink) run(ctx context.Context) {
	for {
		e, ok, drops := s.pop()
		if drops > 0 {
			s.d.log.Warn("notification queue full; dropped the oldest notifications",
				"sink", s.name, "dropped", drops, "dropped_total", s.dropped.Load())
		}
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		s.handle(ctx, e)
		s.mu.Lock()
		s.busy = false
		s.mu.Unlock()
	}
}

// dedupKey identifies "the same notification": one sink (the map is per
// sink), one application, type and service, and the same rendered text.
type dedupKey struct {
	app, service, text string
	typ                events.Type
}

type dedupEntry struct {
	at         time.Time // of the last delivery, or of the failure that kept the count
	delivered  bool      // false: the count is kept for the next delivery, nothing is suppressed
	suppressed int       // repeats not sent since at
}

// handle renders, deduplicates and delivers one event.
func (s *sink) handle(ctx context.Context, e events.Event) {
	log := s.d.log.With("sink", s.name, "app", e.App, "event", string(e.Type))
	text, err := s.render(e)
	if err != nil {
		log.Warn("notification template failed; sending the default text instead", "error", err)
	}

	now := s.d.opts.Clock.Now()
	window := s.d.opts.DedupWindow
	key := dedupKey{app: e.App, typ: e.Type, service: e.Service, text: text}
	var similar int
	if window > 0 {
		if ent, ok := s.seen[key]; ok {
			if ent.delivered && now.Sub(ent.at) < window {
				ent.suppressed++
				s.suppressed.Add(1)
				log.Debug("repeated notification suppressed", "suppressed", ent.suppressed)
				return
			}
			similar = ent.suppressed
			delete(s.seen, key)
		}
		s.forget(now)
	}

	body, err := s.body(e, text, similar)
	if err != nil {
		log.Error("notification not sent: cannot encode it", "error", err)
		s.failed.Add(1)
		return
	}
	attempts, err := s.deliver(ctx, log, body)
	switch {
	case err == nil:
		s.delivered.Add(1)
		if window > 0 {
			s.seen[key] = &dedupEntry{at: now, delivered: true}
		}
		log.Debug("notification delivered", "attempts", attempts)
		return
	case ctx.Err() != nil:
		return // shutting down; not the sink's failure
	}
	if window > 0 && similar > 0 {
		// Keep the count for the next one that gets through.
		s.seen[key] = &dedupEntry{at: now, suppressed: similar}
	}
	if perm := (*permanentError)(nil); errors.As(err, &perm) {
		log.Error("notification not delivered; not retried", "attempts", attempts, "error", err)
	} else {
		log.Warn("notification not delivered; giving up", "attempts", attempts, "error", err)
	}
	s.failed.Add(1) // after the log line, so a reader of Stats finds it written
}

// forget drops dedup entries whose window has passed, logging the repeats
// they suppressed that no later delivery will mention.
func (s *sink) forget(now time.Time) {
	for k, ent := range s.seen {
		if now.Sub(ent.at) < s.d.opts.DedupWindow {
			continue
		}
		if ent.suppressed > 0 {
			s.d.log.Info("repeated notifications were suppressed and not sent",
				"sink", s.name, "app", k.app, "event", string(k.typ), "suppressed", ent.suppressed)
		}
		delete(s.seen, k)
	}
}
