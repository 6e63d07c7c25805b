// Package labels is the one home of the label keys Flotilla writes on swarm
// objects and reads back. The backend stamps them when it writes; the
// reconcile pass reads them from what the swarm runs (which revision a
// hook job belongs to, who owns a service); the installer and the tests
// look objects up by them. Declared once here, they cannot drift apart.
package labels

// Docker's own stack labels, used as the docker CLI uses them, so stacks
// stay manageable with `docker stack`.
const (
	// Namespace scopes services, networks, configs and secrets to a
	// stack, as `docker stack deploy` does.
	Namespace = "com.docker.stack.namespace"
	// Image records the image reference the stack file asked for, before
	// any digest was pinned.
	Image = "com.docker.stack.image"
)

// Flotilla's labels on what it deploys and on its release records.
const (
	// Owner is "<controller-id>/<application>": who deployed the object.
	Owner = "io.flotilla.owner"
	// Release is the stack a service or record belongs to.
	Release = "io.flotilla.release"
	// Revision is the release revision that last wrote the object.
	Revision = "io.flotilla.revision"
	// Commit is the source commit of that revision.
	Commit = "io.flotilla.commit"
	// SpecHash is the sha256 of the desired spec a service was last
	// written with (see backend).
	SpecHash = "io.flotilla.spec-hash"
	// Record marks a config as a release record.
	Record = "io.flotilla.record"
	// Epoch is the leader epoch a controller with a lease wrote under.
	Epoch = "io.flotilla.epoch"
)

// Prefix starts every label Flotilla writes. A stack may not declare one
// (the backend's guard refuses it: release records are found by these
// labels, so an object carrying them could pass for another application's
// history), and drift never compares them: they are metadata about the
// deploy, not part of what the repository declares.
const Prefix = "io.flotilla."

// RolloutPrefix starts the labels a rollout's state is kept in, on its
// extra colour (see package rollout).
const RolloutPrefix = Prefix + "rollout."

// The lease config's labels. The config carries no stack namespace and no
// record label, so no sweep and no `docker stack rm` ever takes it.
const (
	Lease         = "io.flotilla.lease"
	LeaseHolder   = "io.flotilla.lease.holder"
	LeaseEpoch    = "io.flotilla.lease.epoch"
	LeaseRenewed  = "io.flotilla.lease.renewed"
	LeaseDuration = "io.flotilla.lease.duration"
)

// The memory of fields the daemon did not keep, in the labels of one
// config per stack.
const (
	// NotKept names the stack a not-kept memory belongs to.
	NotKept = "io.flotilla.not-kept"
	// NotKeptFields holds the memory: JSON of scoped service to field to
	// capability.NotKeptField (digests, never values).
	NotKeptFields = "io.flotilla.not-kept.fields"
)

// RecordFormat numbers the layout of a release record's data. A record
// without it is format 1.
const RecordFormat = "io.flotilla.record-format"

// Labels a hook job carries from its creation. They are never rewritten:
// any update of a job service makes Swarm run it again.
const (
	// Hook is the hook's phase (PreSync, PostSync, SyncFail).
	Hook = "io.flotilla.hook"
	// HookTarget is a digest of the manifest the hook ran for: a job
	// carrying the pass's own has already been run for this revision.
	HookTarget = "io.flotilla.hook.target"
)

// Install marks what `flotilla install` created; uninstall removes only
// objects bearing it with the stack's name, never a secret of the same
// name made by hand.
const Install = "io.flotilla.install"
