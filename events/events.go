// Package events carries what the controller does to whoever is watching: the
// API's Server-Sent Events stream, the CLI's live progress, notification sinks.
//
// A Broker numbers every event, keeps the most recent ones in a ring so that a
// client reconnecting with the last id it saw misses nothing still held, and
// gives each subscriber its own bounded queue. The controller publishes from
// its reconcile passes, so Publish never waits for a reader: a subscriber that
// falls behind is cut off with a Lagged marker and may come back with its last
// id.
package events

import (
	"time"
)

// Type names what happened. The set is closed; a consumer's switch over it
// should cover every value.
type Type string

// Types the controller publishes.
const (
	SyncStarted     Type = "sync.started"
	SyncSucceeded   Type = "sync.succeeded"
	SyncFailed      Type = "sync.failed"
	DriftDetected   Type = "drift.detected"
	DriftCorrected  Type = "drift.corrected"
	OutOfBandChange Type = "outofband.change"
	// HealthChanged is published for an application whose rolled-up health
	// moved, and, with Service set, for one service whose tasks or update
	// state moved (see Progress).
	HealthChanged Type = "health.changed"
	Pruned        Type = "pruned"
	// HookRan is published when a hook job of a sync starts, succeeds or
	// fails (Data "outcome"; a failure carries its last log lines).
	HookRan Type = "hook.ran"
	// RolledBack is published when an application that stayed Degraded
	// after a sync is rolled back automatically (syncPolicy.rollback).
	RolledBack Type = "sync.rolledback"
	// ConfigRejected is published, with no App, when a reloaded
	// applications file (or what its application sets generate) does not
	// validate and the applications loaded before are kept.
	ConfigRejected Type = "config.rejected"
	// GeneratedRefused is published, with no App, for an application an
	// application set generated that does not validate (a directory name,
	// a duplicate): it is left out and the rest of the file applies. Its
	// Message names the set, the element and the field.
	GeneratedRefused Type = "generated.refused"
	// AuditRecorded is published for every audited write to the API, with
	// the entry's fields in Data (see AuditData); App is the application
	// the write named, empty for one on the controller as a whole. It
	// holds names and options only, never a token.
	AuditRecorded Type = "audit.recorded"
	// RolloutStep is published, with Service set, when a canary or
	// blue/green rollout took a step that was deployed (Data "action",
	// "phase", "step", "weight"; an abort's "metric" and "values").
	RolloutStep Type = "rollout.step"
	// ImageCommitted is published when image automation pushed a commit
	// of new image references (Revision is the commit, Message its
	// subject, Data "updates" the number of fields written).
	ImageCommitted Type = "image.committed"
	// ImageProposed is published when image automation pushed a commit to
	// its pull request's branch, or opened or edited the pull request
	// (Revision is the branch's commit, Message its subject, Data
	// "updates", "number", "url", "branch" and "opened").
	ImageProposed Type = "image.proposed"
	// ImageHeld is published when a marked image field is held back: its
	// tag went backwards or vanished, or it could not be decided (Data
	// "image", "file", "field", "outcome"). It is published when the
	// reason appears or changes, not on every interval.
	ImageHeld Type = "image.held"
)

// Markers a Broker itself puts into a subscription. They are never
// published and never replayed.
const (
	// Lagged is the last event of a subscription that fell behind and was
	// closed. ID is the last event it did receive; resubscribing after it
	// loses nothing still in the ring.
	Lagged Type = "stream.lagged"
	// Gap opens a replay that could not start where asked: events between
	// the requested id and the oldest one held were dropped from the ring,
	// or the id came from an earlier controller process. A consumer that
	// keeps state should reload it.
	Gap Type = "stream.gap"
)

// Valid reports whether t is a published type or a marker.
func (t Type) Valid() bool {
	switch t {
	case SyncStarted, SyncSucceeded, SyncFailed, DriftDetected, DriftCorrected,
		OutOfBandChange, HealthChanged, Pruned, HookRan, RolledBack, ConfigRejected, GeneratedRefused, AuditRecorded, RolloutStep, ImageCommitted, ImageProposed, ImageHeld, Lagged, Gap:
		return true
	}
	return false
}

// Marker reports whether t is a Broker marker rather than something the
// controller did.
func (t Type) Marker() bool { return t == Lagged || t == Gap }

// Event is one thing that happened to an application. Every string in it is
// meant for display: publishers pass error text through the sanitiser first.
type Event struct {
	// ID is assigned by Publish and increases by one per event.
	ID   uint64    `json:"id"`
	Time time.Time `json:"time"`
	Type Type      `json:"type"`

	App   string `json:"app,omitempty"`
	Stack string `json:"stack,omitempty"`
	// Swarm is the application's destination ("local" for the
	// controller's own).
	Swarm    string `json:"swarm,omitempty"`
	Service  string `json:"service,omitempty"`
	Revision string `json:"revision,omitempty"`
	Message  string `json:"message,omitempty"`
	// Data holds type-specific detail, such as the counts of Progress. It is
	// shared with every subscriber, so it must not change after Publish.
	Data map[string]any `json:"data,omitempty"`
}

// Keys of Data for a service progress event.
const (
	DataRunning     = "running"
	DataDesired     = "desired"
	DataUpdateState = "updateState"
)

// Progress returns a HealthChanged event for one service: how many tasks run
// out of how many are wanted, and Swarm's update state ("updating",
// "completed", "paused", ...). The CLI draws its live sync view from these.
func Progress(app, stack, service string, running, desired int, updateState, message string) Event {
	return Event{
		Type: HealthChanged, App: app, Stack: stack, Service: service, Message: message,
		Data: map[string]any{DataRunning: running, DataDesired: desired, DataUpdateState: updateState},
	}
}

// ProgressOf reads back what Progress put into an event, whether the event
// was built in process or decoded from JSON (where numbers are float64).
func ProgressOf(e Event) (running, desired int, updateState string, ok bool) {
	if e.Type != HealthChanged || e.Service == "" || e.Data == nil {
		return 0, 0, "", false
	}
	r, ok1 := asInt(e.Data[DataRunning])
	d, ok2 := asInt(e.Data[DataDesired])
	s, _ := e.Data[DataUpdateState].(string)
	return r, d, s, ok1 && ok2
}

func asInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case uint64:
		return int(n), true
	case float64:
		return int(n), true
	}
	return 0, false
}
