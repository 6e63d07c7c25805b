package application

import "time"

// Sync says whether the swarm runs what the repository declares.
type Sync string

// The closed set of Sync values; a switch over Sync covers all three.
const (
	// Synced: every release planned as unchanged and no live drift seen.
	Synced Sync = "Synced"
	// OutOfSync: something differs; SyncReason says which side moved.
	OutOfSync Sync = "OutOfSync"
	// Unknown: the comparison could not be made (git or the daemon could
	// not be read, or the render failed). Never guessed as either of the
	// others.
	SyncUnknown Sync = "Unknown"
)

// Valid reports whether s is one of the declared values.
func (s Sync) Valid() bool {
	switch s {
	case Synced, OutOfSync, SyncUnknown:
		return true
	}
	return false
}

// Reason says why an application is OutOfSync. It is ReasonNone for every
// other Sync value.
type Reason string

// The closed set of Reason values.
const (
	ReasonNone Reason = ""
	// ReasonGit: the repository moved; the next apply deploys a new
	// revision. It wins when both sides moved, since applying git also
	// overwrites the drift.
	ReasonGit Reason = "git"
	// ReasonDrift: the swarm moved behind the controller's back while the
	// repository stayed put; self-heal, if enabled, puts it back.
	ReasonDrift Reason = "drift"
)

// Valid reports whether r is one of the declared values.
func (r Reason) Valid() bool {
	switch r {
	case ReasonNone, ReasonGit, ReasonDrift:
		return true
	}
	return false
}

// Health is the rolled-up state of a service, stack or application.
type Health string

// The closed set of Health values, listed from best to worst in the order
// Worst uses.
const (
	// Healthy: every service runs its desired number of tasks.
	Healthy Health = "Healthy"
	// Suspended: deliberately scaled to zero (replicas: 0); nothing is
	// wrong and nothing is running.
	Suspended Health = "Suspended"
	// Progressing: an update or rollout is under way and may still
	// converge on its own.
	Progressing Health = "Progressing"
	// Missing: declared by the repository but absent from the swarm, as
	// before a first sync or after someone removed it.
	Missing Health = "Missing"
	// Degraded: present but failing: tasks crash, an update paused or
	// rolled back, fewer tasks run than desired and none are starting.
	Degraded Health = "Degraded"
	// HealthUnknown: the swarm could not be read. Never reported as
	// Missing: an unreadable daemon is not an empty stack.
	HealthUnknown Health = "Unknown"
)

// Valid reports whether h is one of the declared values.
func (h Health) Valid() bool {
	return h.rank() >= 0
}

// rank orders Health for Worst; -1 for a value outside the vocabulary.
func (h Health) rank() int {
	switch h {
	case Healthy:
		return 0
	case Suspended:
		return 1
	case Progressing:
		return 2
	case Missing:
		return 3
	case Degraded:
		return 4
	case HealthUnknown:
		return 5
	}
	return -1
}

// Worst returns the worse of a and b, for rolling services up into a stack
// and stacks into an application. The order is
//
//	Healthy < Suspended < Progressing < Missing < Degraded < Unknown
//
// Progressing sits below Missing and Degraded because it may heal without
// help. Degraded outranks Missing because a failing service needs a person,
// while a missing one is usually a sync away. Unknown is worst because a
// part that could not be read may hide any of the others, and a rollup must
// never look better than what it could not see. A value outside the
// vocabulary counts as Unknown and is returned as HealthUnknown.
func Worst(a, b Health) Health {
	ra, rb := a.rank(), b.rank()
	if ra < 0 || rb < 0 {
		return HealthUnknown
	}
	if rb > ra {
		return b
	}
	return a
}

// Status is what the controller publishes for one application after every
// pass, on every exit path, through the API and the UI.
type Status struct {
	Name  string `json:"name"`
	Stack string `json:"stack"`
	// Destination is the swarm the stack runs on (LocalDestination for
	// the controller's own).
	Destination string `json:"destination,omitempty"`
	// Set names the application set that generated the application; empty
	// for one written in the file.
	Set string `json:"set,omitempty"`
	// Waiting says why the last pass did not apply although it would
	// have: the dependencies it waits for, or the sync window and until
	// when. Empty when nothing holds it.
	Waiting string `json:"waiting,omitempty"`

	Sync Sync `json:"sync"`
	// SyncReason is set only when Sync is OutOfSync.
	SyncReason Reason `json:"syncReason,omitempty"`

	Health Health `json:"health"`
	// HealthMessage explains any Health other than Healthy, in one line.
	HealthMessage string `json:"healthMessage,omitempty"`

	// Revision is the commit last applied successfully; SeenRevision the
	// commit last fetched or attempted. They differ while a new commit
	// fails to render or apply, and that gap is the thing to look at.
	Revision     string `json:"revision,omitempty"`
	SeenRevision string `json:"seenRevision,omitempty"`
	// LastAppliedRevision is the number of the release record written by
	// the last successful apply; 0 before the first.
	LastAppliedRevision int `json:"lastAppliedRevision,omitempty"`
	// SecretRefs are the secrets the deployed revision took from secret
	// stores, with their versions and last rotation; never a value.
	SecretRefs []SecretRefStatus `json:"secretRefs,omitempty"`
	// Chart names the chart that release was rendered from, its version
	// and a digest of its values ("shop 0.1.0, values sha256:…"); empty
	// for a compose application.
	Chart string `json:"chart,omitempty"`
	// Pinned says the application stays on a rolled-back revision, and
	// until when; empty otherwise.
	Pinned string `json:"pinned,omitempty"`
	// LastError is the sanitised error of the last pass, empty when it
	// succeeded.
	LastError string `json:"lastError,omitempty"`
	// Unavailable names features this application lost because the backend
	// lacks a capability, such as "live drift: backend lacks LiveDrift".
	// A lost feature is listed, never silently off.
	Unavailable []string `json:"unavailable,omitempty"`
	// LastSyncTime is when the last apply finished; zero before the first.
	LastSyncTime time.Time `json:"lastSyncTime,omitzero"`
	// LastPass is when the last pass finished, whatever it did; with
	// Interval it shows whether the loop is still running.
	LastPass time.Time `json:"lastPass,omitzero"`

	Services []ServiceStatus `json:"services,omitempty"`
	// Hooks are the hook jobs the manifest declares, phase by phase in the
	// order they run, each as the swarm shows it (its job service and
	// tasks); empty for a manifest without hooks.
	Hooks []HookStatus `json:"hooks,omitempty"`
	// Rollouts are the canary and blue/green rollouts of the manifest's
	// services as the last pass decided them, by service; empty when no
	// service declares one.
	Rollouts []RolloutStatus `json:"rollouts,omitempty"`

	// Drift lists every field of every service whose live spec differs
	// from what the repository converts to, while the repository has not
	// moved. Values of secret-looking keys are masked.
	Drift []Drift `json:"drift,omitempty"`
	// Corrected lists the drift the last pass put back (self-heal or an
	// explicit sync), field by field; empty when it corrected nothing.
	Corrected []Drift `json:"corrected,omitempty"`
	// RolledBack names services Swarm rolled back after a failed update.
	// They are not healed into the failing spec again until git changes.
	RolledBack []string `json:"rolledBack,omitempty"`
	// OutOfBand names services another writer changed while this
	// controller was writing them (a lost compare-and-swap).
	OutOfBand []string `json:"outOfBand,omitempty"`
	// Warnings are what the drift comparison noticed that is neither drift
	// nor a failure, one line each: a service that keeps updating for longer
	// than its update config allows, or a field the daemon did not keep
	// after a write (not rewritten until the repository changes it).
	Warnings []string `json:"warnings,omitempty"`

	// Sweep is what the last sweep removed, would remove, or left alone and
	// why; nil until a sweep has run.
	Sweep *SweepStatus `json:"sweep,omitempty"`

	// Images is what image automation last did; nil for an application
	// without imageUpdates, or before its first run.
	Images *ImageStatus `json:"images,omitempty"`
}

// ImageStatus is the last run of an application's image policies.
type ImageStatus struct {
	// LastRun is when the last run ended.
	LastRun time.Time `json:"lastRun,omitzero"`
	// LastCommit is the last commit image automation pushed, and its
	// committer time (UTC, to the second); read back from git after a
	// restart or a failover.
	LastCommit     string    `json:"lastCommit,omitempty"`
	LastCommitTime time.Time `json:"lastCommitTime,omitzero"`
	// LastError is the sanitised error that stopped the last run (a clone
	// or a push); empty when it ran.
	LastError string `json:"lastError,omitempty"`
	// PullRequest is the open pull request that proposes the updates,
	// with imageUpdates.pullRequest; absent when nothing is proposed.
	PullRequest *ImagePullRequestStatus `json:"pullRequest,omitempty"`
	// Fields are the marked fields, as the last run found them.
	Fields []ImageField `json:"fields,omitempty"`
}

// ImagePullRequestStatus is the pull request (GitLab: merge request) image
// updates are proposed in: its number and page, and its head branch (the
// updater's own) and base.
type ImagePullRequestStatus struct {
	Number int    `json:"number"`
	URL    string `json:"url,omitempty"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
}

// ImageField is one marked field: the image it follows, its value in git,
// the newest reference the policy found, and the outcome (update, current,
// backwards, vanished, no-candidate, error) with its reason.
type ImageField struct {
	Image   string `json:"image"`
	File    string `json:"file"`
	Field   string `json:"field"`
	Current string `json:"current,omitempty"`
	Newest  string `json:"newest,omitempty"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

// Drift is one field of one service that differs between the repository and
// the swarm.
type Drift struct {
	Service string `json:"service"`
	Field   string `json:"field"`
	Desired string `json:"desired"`
	Live    string `json:"live"`
	Masked  bool   `json:"masked,omitempty"`
}

// SweepStatus reports one sweep of an application's stack.
type SweepStatus struct {
	// DryRun is set when nothing was deleted: Pending is then what a
	// sweep with prune on would remove.
	DryRun bool `json:"dryRun"`
	// Pending lists "kind name" of what would be removed.
	Pending []string `json:"pending,omitempty"`
	// Removed lists "kind name" of what this sweep removed.
	Removed []string `json:"removed,omitempty"`
	// Unmanaged lists "kind name" of resources in the stack's namespace that
	// no record of this application proves it created; never touched.
	Unmanaged []string `json:"unmanaged,omitempty"`
	// Messages are the sweep's report lines, for people.
	Messages []string `json:"messages,omitempty"`
}

// ServiceStatus is one service of the application's stack.
type ServiceStatus struct {
	// Name is the service name without the stack prefix.
	Name   string `json:"name"`
	Health Health `json:"health"`
	// Running and Desired count tasks; for a global service Desired is the
	// number of nodes it should run on.
	Running int    `json:"running"`
	Desired int    `json:"desired"`
	Message string `json:"message,omitempty"`
	// Tasks are the service's current tasks as the last health read saw
	// them (with the latest failure of each slot), newest first, so that a
	// console can show where each runs and why one failed.
	Tasks []TaskStatus `json:"tasks,omitempty"`
	// Networks, Configs and Secrets name what the service uses (names
	// only), as the backend read them.
	Networks []string `json:"networks,omitempty"`
	Configs  []string `json:"configs,omitempty"`
	Secrets  []string `json:"secrets,omitempty"`
	// Volumes name the service's mounts: named volumes by name, bind
	// mounts and anonymous volumes by their target path.
	Volumes []string `json:"volumes,omitempty"`
}

// TaskStatus is one task of a service.
type TaskStatus struct {
	ID           string    `json:"id"`
	Slot         int       `json:"slot,omitempty"`
	Node         string    `json:"node,omitempty"` // node id
	State        string    `json:"state"`
	DesiredState string    `json:"desiredState,omitempty"`
	Health       string    `json:"health,omitempty"` // the container's healthcheck, when it has one
	Error        string    `json:"error,omitempty"`
	Message      string    `json:"message,omitempty"` // Swarm's word on the state
	Since        time.Time `json:"since"`
	// NodeName is the node's hostname when the backend knows it.
	NodeName string `json:"nodeName,omitempty"`
	// NodeLost says the task's node is down: State is the node's last
	// report, not known to be true now.
	NodeLost bool `json:"nodeLost,omitempty"`
	// Restarts counts the earlier tasks of a running task's slot that Swarm
	// keeps; RestartsFull says that is Swarm's retention limit, so there
	// may have been more.
	Restarts     int  `json:"restarts,omitempty"`
	RestartsFull bool `json:"restartsFull,omitempty"`
}

// HookState is where one hook job stands for the manifest being synced.
type HookState string

// The hook states.
const (
	// HookPending: not run for this manifest yet; an earlier wave of its
	// phase, or the sync, has not reached it.
	HookPending HookState = "Pending"
	// HookRunning: its job exists for this manifest and has not finished.
	HookRunning HookState = "Running"
	// HookSucceeded: its job completed for this manifest.
	HookSucceeded HookState = "Succeeded"
	// HookFailed: its job failed for this manifest; the sync stopped there.
	HookFailed HookState = "Failed"
	// HookSkipped: not created, because a hook of an earlier wave of its
	// phase failed (or, for SyncFail, because the sync did not fail).
	HookSkipped HookState = "Skipped"
)

// HookStatus is one hook job of the application's manifest.
type HookStatus struct {
	// Name is the service name without the stack prefix.
	Name string `json:"name"`
	// Phase is PreSync, PostSync or SyncFail; Wave orders the hooks of a
	// phase, lowest first.
	Phase string `json:"phase"`
	Wave  int    `json:"wave"`
	// Revision is the release revision the job was created for, from its
	// labels; 0 when no job exists.
	Revision int       `json:"revision,omitempty"`
	State    HookState `json:"state"`
	// StartedAt is when its job service was created, FinishedAt when its
	// task completed or failed; zero when not known.
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// ExitCode is the exit status of its task, when Swarm reported one.
	ExitCode *int   `json:"exitCode,omitempty"`
	Message  string `json:"message,omitempty"`
	// LogTail is the last lines of a failed hook's logs, with what the
	// controller knows to be secret redacted.
	LogTail []string `json:"logTail,omitempty"`
}

// HookLogsMarker starts the part of an error message that quotes a failed
// hook's last log lines: everything after it is the job's own output. The
// reconciler writes it, and the API cuts the message there for callers who
// may not read the application's logs.
const HookLogsMarker = "; last log lines:\n"

// RolloutStatus is one service's canary or blue/green rollout as the last
// pass decided it.
type RolloutStatus struct {
	// Service is the declared service; Colour the extra service beside it.
	Service  string `json:"service"`
	Colour   string `json:"colour"`
	Strategy string `json:"strategy"`
	// Revision identifies the definition being rolled out.
	Revision string `json:"revision,omitempty"`
	// Phase is Progressing, Previewing, Switched, Promoting, Completed,
	// Aborted or Superseded; empty when nothing was ever rolled out.
	Phase string `json:"phase,omitempty"`
	Step  int    `json:"step"`
	// Steps are a canary's declared step weights, in percent, in order:
	// the whole plan Step is a place in.
	Steps []int `json:"steps,omitempty"`
	// Weight is the extra colour's share of traffic in percent, Replicas
	// its replica count.
	Weight   int  `json:"weight"`
	Replicas int  `json:"replicas"`
	Paused   bool `json:"paused,omitempty"`
	// Verdict is the last analysis verdict counted in this step; Metric
	// and Values name the evidence of an abort.
	Verdict string `json:"verdict,omitempty"`
	Metric  string `json:"metric,omitempty"`
	Values  string `json:"values,omitempty"`
	// Reason says what the last decision did or why it waits.
	Reason string `json:"reason,omitempty"`
	// NextCheck is when the pass looks again by itself; zero when only a
	// new revision or an operator's command changes anything.
	NextCheck time.Time `json:"nextCheck,omitzero"`
	// Error is set when the rollout could not be decided: all traffic
	// stays on the stable service.
	Error string `json:"error,omitempty"`
	// Pending is an operator's command (promote, abort, pause, resume,
	// retry) accepted and not yet deployed by a pass. It lives in the
	// controller's memory only: one that restarts before its next pass
	// forgets it, and Pending going empty without the rollout changing
	// says so; send the command again.
	Pending string `json:"pending,omitempty"`
}

// SecretRefStatus is one secret an application's deployed revision took
// from a secret store.
type SecretRefStatus struct {
	// Kind is "" for a top-level secret, "config" for a top-level
	// config, "env" for a service's environment variable.
	Kind string `json:"kind,omitempty"`
	// Secret is the compose secret's or config's key, or the variable's
	// name.
	Secret string `json:"secret"`
	// Service is, for an environment variable, the service that has it.
	Service string `json:"service,omitempty"`
	// Store, Path and Key name the value.
	Store string `json:"store"`
	Path  string `json:"path"`
	Key   string `json:"key"`
	// Version is the store's version of the entry (0: the store keeps
	// none, as KV v1).
	Version int `json:"version,omitempty"`
	// VersionID is the version id of a store that names versions by id
	// (AWS Secrets Manager); empty otherwise.
	VersionID string `json:"versionID,omitempty"`
	// SwarmSecret is the content-named swarm secret or config that holds
	// it; for an environment variable, its sealed placeholder.
	SwarmSecret string `json:"swarmSecret"`
	// LastRotated is when a revision last deployed a new value, and
	// RotatedRevision that revision; zero when it never changed.
	LastRotated     time.Time `json:"lastRotated,omitzero"`
	RotatedRevision int       `json:"rotatedRevision,omitempty"`
}
