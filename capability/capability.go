// Package capability declares what a deploy backend may do beyond the minimal
// charts.Backend contract, and nothing else: no implementation lives here.
//
// The reconciler holds a charts.Backend and asks for each capability through
// the helper of the same name in lookup.go, which type-asserts (following
// Unwrap chains) and, where the capability is missing, either falls back
// with the same contract or reports the feature as unavailable. A missing
// capability costs exactly its feature; it never turns a missing answer into
// a wrong one.
package capability

import (
	"context"
	"errors"

	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/regauth"
)

// ErrOwnStack is wrapped by a backend refusing to remove the stack the
// controller itself runs in. A sweep that meets it reports once and moves on
// instead of failing on every pass.
var ErrOwnStack = errors.New("refusing to remove the controller's own stack")

// AllowedReferences lets the reconciler hand a backend one application's
// allowlist; the backend returned enforces it where specs are written, so no
// write can slip past a layer that did not check. A backend without it keeps
// its own rules, which the reconciler never loosens.
type AllowedReferences interface {
	WithAllowedReferences(application.Allow) charts.Backend
}

// DeclaredLister answers what a stored manifest declares, by scoped name,
// without resolving any config or secret to an id. The sweep's walk through
// history needs it: a revision whose config was since deleted must still
// prove its other claims. Without it the walk falls back to
// LiveDrift.DesiredServices and reports the claims it could not prove.
type DeclaredLister interface {
	DeclaredResources(ctx context.Context, manifest, stack string) (*compose.Stack, error)
}

// ForbidSecrets lets the reconciler name secrets and configs no stack may
// mount or declare: the controller's own. Without it a backend enforces only
// what it knows itself.
type ForbidSecrets interface {
	WithForbiddenSecrets(map[string]struct{}) charts.Backend
}

// LiveDrift exposes both halves of a live drift comparison: the ServiceSpecs a
// manifest converts to against today's swarm, and the ServiceSpecs the swarm
// holds. charts.Backend only reports a display projection, so without this an
// application reports drift as unavailable, never as "no drift". Correcting
// drift needs no capability: it is a DeployStack.
type LiveDrift interface {
	DesiredServices(ctx context.Context, manifest, stack string) (*compose.Stack, error)
	LiveServices(ctx context.Context, stack string) (map[string]swarm.Service, error)
}

// LiveServicesBatch reads the live services of several stacks from one
// listing of the swarm. Live drift reads each application's stack, so
// without it a batch of applications lists the swarm's services once per
// application; with it, once per batch. The contract is StacksReader's: a
// nil error means every requested stack is in the map (with an empty map
// when it has no services), a non-nil one that none could be read. Without
// it each stack is read through LiveDrift.LiveServices; the answer is the
// same.
//
// This one is Flotilla's own addition to the seed's set.
type LiveServicesBatch interface {
	LiveServicesOf(ctx context.Context, stacks []string) (map[string]map[string]swarm.Service, error)
}

// LiveStacksReader is StacksReader and LiveServicesBatch from one look at
// the swarm. The service listing behind a batch's health already carries
// every service's spec, so keeping it answers the batch's live drift without
// listing the services a second time. The contract is StacksReader's, for
// both maps. Without it a batch lists the services again for live drift,
// through LiveServicesBatch or stack by stack.
//
// This one is Flotilla's own addition to the seed's set.
type LiveStacksReader interface {
	ReadLiveStacks(ctx context.Context, stacks []string) (map[string][]charts.ServiceState, map[string]map[string]swarm.Service, error)
}

// NetworkNamer maps network ids to names across the whole swarm. Live specs
// name their attachments by id, so without it network attachments are the one
// field drift cannot compare; everything else still is. It is not scoped to a
// stack because external and predefined networks carry no namespace label.
type NetworkNamer interface {
	LiveNetworkNames(ctx context.Context) (map[string]string, error)
}

// OutOfBand lets the reconciler learn, per application, that a service write
// lost its compare-and-swap: the only sign Swarm gives that someone else is
// writing to a service. The backend retries from a fresh read and calls the
// notifier with the service name. Without it such a race is retried silently.
type OutOfBand interface {
	WithOutOfBandNotifier(func(service string)) charts.Backend
}

// RegistryAuth returns a backend whose service writes carry one application's
// registry credential. A backend that authenticates pulls its own way need not
// implement it and is used unchanged.
type RegistryAuth interface {
	WithRegistryAuth(regauth.Resolver) charts.Backend
}

// ResourceLister reads the networks, configs and secrets of one stack, scoped
// name to id. The sweep matches on the scoped name and deletes by id. Without
// it the sweep can only consider services.
type ResourceLister interface {
	LiveNetworks(ctx context.Context, stack string) (map[string]string, error)
	LiveConfigs(ctx context.Context, stack string) (map[string]string, error)
	LiveSecrets(ctx context.Context, stack string) (map[string]string, error)
}

// ResourceRemover deletes single resources. Kept apart from the readers so a
// read-only backend still reports what a sweep would remove, as a dry run.
type ResourceRemover interface {
	RemoveService(ctx context.Context, id string) error
	RemoveNetwork(ctx context.Context, id string) error
	RemoveConfig(ctx context.Context, id string) error
	RemoveSecret(ctx context.Context, id string) error
}

// StackServicesReader reports one stack's services or an error, so a daemon
// that could not be read is published as Unknown rather than as a stack with
// nothing on it.
type StackServicesReader interface {
	ReadStackServices(ctx context.Context, name string) ([]charts.ServiceState, error)
}

// StacksReader answers for many releases from one look at the swarm. It is
// all-or-nothing: a nil error means every requested release is in the map,
// and an error means none is. Without it each release is read on its own.
type StacksReader interface {
	ReadStacks(ctx context.Context, releases []string) (map[string][]charts.ServiceState, error)
}

// SwarmSizer counts the swarm's nodes. Without it a volume listing cannot be
// known to cover the whole swarm, so volumes are never deleted.
type SwarmSizer interface {
	SwarmNodes(ctx context.Context) (int, error)
}

// SwarmNodeNamer names the swarm's nodes by hostname, sorted. It only
// makes reports more precise: a volume left on a swarm of several nodes is
// reported with the nodes to remove it on; without it the report says "each
// node".
//
// This one is Flotilla's own addition to the seed's set.
type SwarmNodeNamer interface {
	SwarmNodeNames(ctx context.Context) ([]string, error)
}

// ReleaseLister names every release recorded on the swarm with the owner of
// its newest record. It is how a controller finds stacks whose application
// was removed from its applications file, also after a restart: the records
// in the swarm are the evidence. Without it such stacks are never pruned,
// and the controller says so.
//
// This one is Flotilla's own addition to the seed's set.
type ReleaseLister interface {
	ReleaseOwners(ctx context.Context) (map[string]string, error)
}

// ReleaseHead tells, from one small read, whether a record a caller kept is
// still the newest of its release: the same object, unchanged, with nothing
// newer beside it. It is what lets a controller keep the newest record in
// memory between passes without trusting its memory over the swarm: records
// deleted by hand or written by a second controller are noticed on the next
// pass, for the price of a listing that carries one record instead of the
// whole history. Without it the whole history is read on every pass.
//
// This one is Flotilla's own addition to the seed's set.
type ReleaseHead interface {
	IsLatestRelease(ctx context.Context, r charts.Release) (bool, error)
}

// ReleaseHeads is ReleaseHead for many releases from one listing: it tells
// which of the records a caller kept (one per release) are still the newest
// of their releases, by release name, and every record asked about is in the
// answer. A controller checking each application's record on its own sends
// one listing per application per batch; with it, one per batch. Without it
// each record is checked through ReleaseHead on its own; the answer is the
// same.
//
// This one is Flotilla's own addition to the seed's set.
type ReleaseHeads interface {
	AreLatestReleases(ctx context.Context, kept []charts.Release) (map[string]bool, error)
}

// OwnerStamps reads the owner stamp ("<controller-id>/<application>") each
// service, network, config and secret of a stack carries, by scoped name;
// an object without one is left out. A release record proves what a deploy
// declared only once the deploy has finished; the stamp is written with the
// object itself, so it is the proof that survives a controller killed
// between its first write and its record. It can be trusted because no
// stack may set a label under io.flotilla. (the guards refuse it). Without
// it a sweep proves ownership from records alone, and what a crashed deploy
// created is reported as unmanaged and kept.
//
// This one is Flotilla's own addition to the seed's set.
type OwnerStamps interface {
	LiveOwners(ctx context.Context, stack string) (Owners, error)
}

// Owners is what OwnerStamps reads: per kind, scoped name to owner stamp.
type Owners struct {
	Services map[string]string
	Networks map[string]string
	Configs  map[string]string
	Secrets  map[string]string
}

// LiveResources reads, in one go, everything a sweep compares in a stack:
// its networks, configs and secrets by scoped name to id, its services with
// their specs, and the owner stamp each object carries. ResourceLister,
// LiveDrift.LiveServices and OwnerStamps answer the same questions one at a
// time, and a sweep asking all three lists every kind twice; a backend with
// this lists each kind once. Without it a sweep reads through those three,
// with the same result.
//
// This one is Flotilla's own addition to the seed's set.
type LiveResources interface {
	LiveResources(ctx context.Context, stack string) (Resources, error)
}

// Resources is what LiveResources reads. Owners leaves out objects without a
// stamp, as OwnerStamps does.
type Resources struct {
	Networks map[string]string
	Configs  map[string]string
	Secrets  map[string]string
	Services map[string]swarm.Service
	Owners   Owners
}

// VolumeSweeper lists a stack's named volumes (name to name: volumes have no
// other id) and removes one. A listing through one manager covers only the
// volumes of that node, so a sweep deletes with it only where SwarmSizer
// says the swarm is that one node. Without it volumes are never swept, and
// the sweep says so when pruneVolumes asks for it.
//
// This one is Flotilla's own addition to the seed's set.
type VolumeSweeper interface {
	LiveVolumes(ctx context.Context, stack string) (map[string]string, error)
	RemoveVolume(ctx context.Context, name string) error
}

// APIVersioner names the Docker API version the backend talks to the daemon
// with. It only words reports: the fields of a manifest that version cannot
// carry are named before a deploy drops them, and a field a write could not
// make stick is remembered with the version that wrote it. Without it those
// fields are still compared and kept apart, but no report names the version.
//
// This one is Flotilla's own addition to the seed's set.
type APIVersioner interface {
	APIVersion() string
}

// NotKeptMemory keeps in the swarm which fields of a stack's services a
// write of this controller could not make stick: the daemon read them back
// otherwise (a value it normalises, a field it drops). The controller
// remembers them so it does not write the same value again on every pass;
// kept in the swarm, the memory outlives a restart or a takeover, so a new
// controller does not write them once more either. Without it the memory
// lives in the controller's process, and each start costs one write per
// such service.
//
// This one is Flotilla's own addition to the seed's set.
type NotKeptMemory interface {
	// NotKept returns what was remembered for stack, by scoped service
	// and field; empty when nothing was.
	NotKept(ctx context.Context, stack string) (map[string]map[string]NotKeptField, error)
	// RememberNotKept replaces what is remembered for stack; an empty map
	// forgets it.
	RememberNotKept(ctx context.Context, stack string, fields map[string]map[string]NotKeptField) error
}

// NotKeptField is one field a write did not make stick: digests of the
// value written and of the value the daemon kept (never the values, which
// may be a stack's configuration), and the API version the write used.
type NotKeptField struct {
	Desired    string `json:"desired"`
	Live       string `json:"live"`
	APIVersion string `json:"api,omitempty"`
}
