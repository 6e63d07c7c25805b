// Package charts holds the smallest contract the reconciler needs from a deploy
// backend, the records of what was deployed, and the planning decision made from
// them.
//
// In a reconcile pass, charts sits between rendering and the swarm: the reconciler
// renders a manifest, plans it against the newest Release, hands it to a Backend,
// and records a new Release when the deploy succeeded. Everything a backend can do
// beyond Backend lives in package capability and is discovered by type assertion.
package charts

import (
	"context"
	"errors"
	"time"

	"github.com/flotilla-gitops/flotilla/compose"
)

// ErrRecordExists is wrapped by RecordRelease refusing a revision that is
// already recorded. Revisions are numbered by whoever records them, so two
// writers that read the same history pick the same number; the second one
// must learn that it lost, re-read the history and number again, never
// overwrite the first.
var ErrRecordExists = errors.New("release revision already recorded")

// Backend is the minimal contract a deploy target must meet. A backend that
// implements only this can deploy, report and keep history; every richer
// feature (live drift, sweep, guards) is an optional capability.
type Backend interface {
	// DeployStack converges one stack to a manifest: it creates what is
	// missing and updates what differs, writing each service with its
	// version (compare-and-swap). It never removes anything. A request that
	// fails validation writes nothing.
	DeployStack(ctx context.Context, req DeployRequest) (DeployResult, error)

	// StackServices reports the services of one stack for display. It has no
	// error: a swarm that could not be read answers nil, which a poller
	// treats as "not converged yet". Callers that publish what they read use
	// capability.StackServicesReader instead.
	StackServices(ctx context.Context, stack string) []ServiceState

	// RemoveStack deletes every service, network, config and secret that
	// carries the stack's namespace label. Release records are kept.
	RemoveStack(ctx context.Context, stack string) error

	// Releases returns the recorded revisions of one release, newest first.
	Releases(ctx context.Context, release string) ([]Release, error)

	// RecordRelease stores r as the newest revision of its release and
	// drops revisions beyond keep (oldest first). keep < 1 means keep all.
	// A revision already recorded is refused with an error wrapping
	// ErrRecordExists, and the stored record is left as it was.
	RecordRelease(ctx context.Context, r Release, keep int) error
}

// DeployRequest is everything one stack deploy needs.
type DeployRequest struct {
	// Stack is the swarm namespace every object is scoped to.
	Stack string
	// Manifest is the rendered manifest (see compose.Manifest), the same
	// text a Release records.
	Manifest string
	// Secrets holds the plaintext of the manifest's secrets, keyed by the
	// scoped, content-hashed secret name. It lives only in memory: it is
	// never part of a Manifest or a Release.
	Secrets map[string][]byte
	// Sealed maps each placeholder of the manifest to the plaintext it
	// stands for (compose.Rendered.Sealed): values decrypted with SOPS,
	// which the manifest, and so the release record, never holds. Memory
	// only. A backend puts them back with compose.Unseal before writing,
	// and refuses a manifest whose placeholder has no value here.
	Sealed map[string]string
	// Labels are stamped on every service this deploy creates or updates
	// (owner, release, revision). They go on service labels only, never in
	// the task template, so changing them restarts nothing. The owner stamp
	// also goes on every network, config and secret the deploy creates.
	Labels map[string]string
	// Adopt lets the deploy take over a namespace that already holds
	// services no Flotilla owner label accounts for (a stack someone
	// deployed by hand). Without it such a namespace is refused.
	Adopt bool
	// Heal names services (scoped) to rewrite even when the spec they were
	// last deployed with matches the manifest: their live spec drifted and
	// self-heal asked for a correction.
	Heal []string
	// Conversion, when set, is Manifest already converted for Stack (the
	// render step's): a backend that converts the manifest uses it rather
	// than converting the text again. One of another manifest or stack is
	// not used.
	Conversion *compose.Conversion
}

// DeployResult says what a deploy did, per service by unscoped name.
type DeployResult struct {
	Created   []string
	Updated   []string
	Unchanged []string
	// Writes counts every create and update the deploy sent to the swarm,
	// services, networks, configs and secrets alike.
	Writes int
	// Networks names, by id, each network of the manifest as the deploy
	// found or created it. A read-back of the services just written
	// compares their attachments (which hold ids) against these rather
	// than listing every network of the swarm. Nil when not known.
	Networks map[string]string
}

// Changed reports whether the deploy wrote anything.
func (r DeployResult) Changed() bool { return r.Writes > 0 }

// ServiceState is the display projection of one service: what runs and how
// many, without its spec.
type ServiceState struct {
	// Name is the service's unscoped name inside its stack.
	Name string `json:"name"`
	// ID is the swarm service id.
	ID string `json:"id"`
	// Image is the image the service runs, as the swarm holds it.
	Image string `json:"image"`
	// Mode is one of replicated, global, replicated-job, global-job.
	Mode string `json:"mode"`
	// Desired is the number of tasks the service wants running (for jobs,
	// the number of completions wanted).
	Desired uint64 `json:"desired"`
	// Running counts tasks whose state is running.
	Running uint64 `json:"running"`
	// Completed counts tasks that finished successfully (jobs).
	Completed uint64 `json:"completed"`
	// UpdateState is Swarm's UpdateStatus.State ("updating", "paused",
	// "completed", "rollback_started", ...), empty if none.
	UpdateState string `json:"updateState,omitempty"`
	// UpdateMessage is Swarm's message for that state.
	UpdateMessage string `json:"updateMessage,omitempty"`
	// CreatedAt and UpdatedAt are the service object's own times, zero when
	// the backend does not say. UpdatedAt moves on every write to the
	// object, Swarm's own UpdateStatus changes included, so while
	// UpdateState is paused or a rollback it says since when.
	CreatedAt time.Time `json:"createdAt,omitzero"`
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// Tasks are the service's current tasks (desired state not shutdown,
	// plus the most recent failure per slot), newest first.
	Tasks []TaskState `json:"tasks,omitempty"`
	// Version is the swarm object version of the service.
	Version uint64 `json:"version"`
	// Labels are the service's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// HasHealthcheck is true when the task template defines a healthcheck.
	HasHealthcheck bool `json:"hasHealthcheck,omitempty"`
	// NodesDown names (by hostname) the nodes that are down, and not
	// drained, while they hold a task of this service: nodes it lost. Empty
	// when the backend did not need to, or cannot, list nodes. When it is
	// set, a global service's Desired counts these nodes too.
	NodesDown []string `json:"nodesDown,omitempty"`
	// Networks, Configs and Secrets name what the service uses, sorted;
	// never a secret's value. Empty when the backend does not say.
	Networks []string `json:"networks,omitempty"`
	Configs  []string `json:"configs,omitempty"`
	Secrets  []string `json:"secrets,omitempty"`
	// Volumes name the service's mounts, sorted: a named volume by name, a
	// bind mount or anonymous volume by its target path. Empty when the
	// backend does not say.
	Volumes []string `json:"volumes,omitempty"`
}

// TaskState is one task of a service as health judgements need it.
type TaskState struct {
	ID           string    `json:"id"`
	Slot         int       `json:"slot,omitempty"`
	NodeID       string    `json:"nodeId,omitempty"`
	State        string    `json:"state"`
	DesiredState string    `json:"desiredState"`
	Message      string    `json:"message,omitempty"`
	Err          string    `json:"error,omitempty"`
	Timestamp    time.Time `json:"timestamp"`
	// Health is the container health status (healthy, unhealthy,
	// starting) when the daemon reports it, empty otherwise.
	Health string `json:"health,omitempty"`
	// NodeName is the node's hostname, empty when the backend does not
	// know it.
	NodeName string `json:"nodeName,omitempty"`
	// NodeLost says the task's node is down (not drained): its state is the
	// last one the node reported, so it does not count as running.
	NodeLost bool `json:"nodeLost,omitempty"`
	// Restarts counts, for a task Swarm wants running, the earlier tasks of
	// its slot Swarm still keeps (exits, failures, updates). RestartsFull
	// says the count is at Swarm's task history retention limit, so there
	// may have been more.
	Restarts     int  `json:"restarts,omitempty"`
	RestartsFull bool `json:"restartsFull,omitempty"`
	// Outdated says the task runs an earlier task template than its
	// service's (placement aside): Swarm has yet to replace it. Right after
	// a write, before Swarm marks the update as begun, it is the only sign
	// that the running tasks are not the written spec's.
	Outdated bool `json:"outdated,omitempty"`
}

// Release is one recorded revision of a deployed stack.
// SecretRef is one secret a release took from a secret store.
type SecretRef struct {
	// Kind is what took the value: "" for a top-level secret (records
	// written before the other kinds have none), "config" for a top-level
	// config, "env" for a service's environment variable.
	Kind string `json:"kind,omitempty"`
	// Secret is the compose secret's or config's key, or the variable's
	// name.
	Secret string `json:"secret"`
	// Service is, for an environment variable, the service that has it.
	Service string `json:"service,omitempty"`
	// Store, Path and Key name the value in the applications file's store.
	Store string `json:"store"`
	Path  string `json:"path"`
	Key   string `json:"key"`
	// Version is the store's version of the entry; 0 for a store that
	// keeps none (KV v1).
	Version int `json:"version,omitempty"`
	// VersionID is the store's version id, for a store whose versions
	// are ids rather than numbers (AWS Secrets Manager's VersionId); empty
	// otherwise, and in records written before it existed.
	VersionID string `json:"versionID,omitempty"`
	// Name is the swarm secret or config, named by the value's keyed
	// digest: a rotated value has a new one. For an environment variable
	// it is the sealed placeholder of the manifest, which changes likewise.
	Name string `json:"name"`
	// Rotated is when a release first deployed this value in place of an
	// earlier one; zero when it never changed.
	Rotated time.Time `json:"rotated,omitzero"`
	// RotatedRevision is the revision that did.
	RotatedRevision int `json:"rotatedRevision,omitempty"`
}

type Release struct {
	// Name is the release name: the stack it was deployed to.
	Name string `json:"name"`
	// Revision numbers deploys of one release from 1 upwards.
	Revision int `json:"revision"`
	// Owner is the stamp "<controller-id>/<application>" of the deployer.
	Owner string `json:"owner"`
	// Manifest is the rendered manifest that was deployed. It never holds
	// secret plaintext.
	Manifest string `json:"manifest"`
	// Desired is, when a rollout wrote its colours into Manifest (the
	// stable service kept on its old definition, the extra colour beside
	// it), the manifest as the source declared it; empty when the two are
	// the same. A rollback, and the passes that hold it, roll Desired out
	// through the same steps and analysis as a commit would be.
	Desired string `json:"desired,omitempty"`
	// Commit is the source commit the manifest was rendered from.
	Commit string `json:"commit,omitempty"`
	// Time is when the deploy finished.
	Time time.Time `json:"time"`
	// Trigger says who or what asked for the deploy (automated, sync by a
	// user, rollback).
	Trigger string `json:"trigger,omitempty"`
	// PinnedCommit is set on a rollback: the commit git pointed at when
	// the rollback was made. An automated application stays on this
	// record while git still points there, and moves on at the next
	// commit (or an explicit sync).
	PinnedCommit string `json:"pinnedCommit,omitempty"`
	// PinnedValuesCommit is, likewise, the commit of the chart's values
	// repository when the rollback was made; a commit there moves on too.
	PinnedValuesCommit string `json:"pinnedValuesCommit,omitempty"`
	// Author and Message describe the source commit when known.
	Author  string `json:"author,omitempty"`
	Message string `json:"message,omitempty"`

	// Version is the version of the swarm object holding the record, as a
	// backend that stores records in the swarm reads it; zero when unknown.
	// It is not part of what was recorded: it lets a reader that kept a
	// record tell cheaply whether the swarm still holds that very object.
	Version uint64 `json:"-"`
	// Chart is set when the manifest was rendered from a chart.
	Chart *ChartRef `json:"chart,omitempty"`
	// SecretRefs are the secrets the manifest took from secret stores:
	// where each came from and its version, never its value.
	SecretRefs []SecretRef `json:"secretRefs,omitempty"`
	// Set is set when an application set generated the application. It
	// outlives the controller's memory: a controller that starts after the
	// set stopped generating the application learns from it which set the
	// stack came from. Records written before it existed have none.
	Set *SetRef `json:"set,omitempty"`
}

// SetRef names the application set that generated a deployed application,
// with the set's policy as of that deploy.
type SetRef struct {
	Name string `json:"name"`
	// Prune is whether the set removed the stacks of applications it
	// stopped generating, pull-request previews included.
	Prune bool `json:"prune,omitempty"`
	// Preview is whether the application was a pull-request preview.
	Preview bool `json:"preview,omitempty"`
}

// ChartRef says which chart a revision was rendered from. It carries a
// digest of the values and never the values: they may hold secrets, and
// the manifest already says everything they changed.
type ChartRef struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	AppVersion   string `json:"appVersion,omitempty"`
	ValuesDigest string `json:"valuesDigest"`
	// ValuesCommit is the commit of the git repository the chart's value
	// files came from (source.values); "" without one.
	ValuesCommit string `json:"valuesCommit,omitempty"`
}
