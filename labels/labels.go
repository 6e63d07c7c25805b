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
