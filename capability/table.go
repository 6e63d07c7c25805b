package capability

import (
	"reflect"
	"slices"

	"github.com/flotilla-gitops/flotilla/charts"
)

// Descriptor describes one capability: the interface, and what a backend
// without it loses in the words the application's status shows.
type Descriptor struct {
	// Name is the interface's name, as status, errors and docs spell it.
	Name string
	// Type is the interface itself.
	Type reflect.Type
	// Feature is what a backend without the capability loses. Status
	// shows it as "<Feature> unavailable: backend lacks <Name>".
	Feature string
	// Within, when set, names the capability this one refines. A backend
	// lacking that one has lost the whole feature already and is told so
	// under that name, so this one's loss is not reported beside it.
	Within string
	// Seed is true for the capabilities of the founding specification,
	// false for Flotilla's own additions.
	Seed bool
}

// Unavailable is the error that says the feature is lost.
func (d Descriptor) Unavailable() *ErrUnavailable {
	return &ErrUnavailable{Feature: d.Feature, Capability: d.Name}
}

// In reports whether b, or a backend in its Unwrap chain, implements the
// capability. It is As for a capability known only by its descriptor.
func (d Descriptor) In(b charts.Backend) bool {
	for b != nil {
		if reflect.TypeOf(b).Implements(d.Type) {
			return true
		}
		w, ok := b.(Wrapper)
		if !ok {
			return false
		}
		b = w.Unwrap()
	}
	return false
}

// table is every capability, in the order docs/capabilities.md lists them.
// A test fails when an exported interface of this package is missing here,
// and when the docs disagree.
var table = []Descriptor{
	{Name: "StacksReader", Type: reflect.TypeFor[StacksReader](), Feature: "batched swarm reads", Seed: true},
	{Name: "StackServicesReader", Type: reflect.TypeFor[StackServicesReader](), Feature: "trusted health reads", Seed: true},
	{Name: "LiveDrift", Type: reflect.TypeFor[LiveDrift](), Feature: "live drift", Seed: true},
	{Name: "NetworkNamer", Type: reflect.TypeFor[NetworkNamer](), Feature: "network attachment drift", Within: "LiveDrift", Seed: true},
	{Name: "OutOfBand", Type: reflect.TypeFor[OutOfBand](), Feature: "out-of-band change reports", Seed: true},
	{Name: "DeclaredLister", Type: reflect.TypeFor[DeclaredLister](), Feature: "proof from revisions whose configs or secrets are gone", Seed: true},
	{Name: "ResourceLister", Type: reflect.TypeFor[ResourceLister](), Feature: "sweep of networks, configs and secrets", Seed: true},
	{Name: "ResourceRemover", Type: reflect.TypeFor[ResourceRemover](), Feature: "sweep removals", Seed: true},
	{Name: "SwarmSizer", Type: reflect.TypeFor[SwarmSizer](), Feature: "volume removal", Within: "VolumeSweeper", Seed: true},
	{Name: "SwarmNodeNamer", Type: reflect.TypeFor[SwarmNodeNamer](), Feature: "node names in volume reports", Within: "VolumeSweeper"},
	{Name: "AllowedReferences", Type: reflect.TypeFor[AllowedReferences](), Feature: "per-application allowlists", Seed: true},
	{Name: "ForbidSecrets", Type: reflect.TypeFor[ForbidSecrets](), Feature: "refusal of the controller's own secrets", Seed: true},
	{Name: "RegistryAuth", Type: reflect.TypeFor[RegistryAuth](), Feature: "registry credentials", Seed: true},
	{Name: "ReleaseLister", Type: reflect.TypeFor[ReleaseLister](), Feature: "pruning stacks of removed applications"},
	{Name: "ReleaseHead", Type: reflect.TypeFor[ReleaseHead](), Feature: "release record checks without reading the history"},
	{Name: "LiveServicesBatch", Type: reflect.TypeFor[LiveServicesBatch](), Feature: "batched live drift reads", Within: "LiveDrift"},
	{Name: "LiveStacksReader", Type: reflect.TypeFor[LiveStacksReader](), Feature: "one service listing for health and drift", Within: "LiveDrift"},
	{Name: "ReleaseHeads", Type: reflect.TypeFor[ReleaseHeads](), Feature: "batched release record checks"},
	{Name: "OwnerStamps", Type: reflect.TypeFor[OwnerStamps](), Feature: "proof from owner stamps"},
	{Name: "LiveResources", Type: reflect.TypeFor[LiveResources](), Feature: "one listing per kind for the sweep"},
	{Name: "NotKeptMemory", Type: reflect.TypeFor[NotKeptMemory](), Feature: "memory of fields not kept across restarts"},
	{Name: "VolumeSweeper", Type: reflect.TypeFor[VolumeSweeper](), Feature: "volume sweep"},
	{Name: "ServiceLogs", Type: reflect.TypeFor[ServiceLogs](), Feature: "hook logs"},
	{Name: "StackLogs", Type: reflect.TypeFor[StackLogs](), Feature: "service logs"},
	{Name: "APIVersioner", Type: reflect.TypeFor[APIVersioner](), Feature: "API version in reports"},
}

// All returns every capability, in a fixed order. The slice is the
// caller's own.
func All() []Descriptor { return slices.Clone(table) }

// Lookup returns the capability called name.
func Lookup(name string) (Descriptor, bool) {
	i := slices.IndexFunc(table, func(d Descriptor) bool { return d.Name == name })
	if i < 0 {
		return Descriptor{}, false
	}
	return table[i], true
}

// Lost is the error that says the feature of capability T is lost, in the
// table's words.
func Lost[T any]() *ErrUnavailable {
	t := reflect.TypeFor[T]()
	for _, d := range table {
		if d.Type == t {
			return d.Unavailable()
		}
	}
	return &ErrUnavailable{Feature: t.Name(), Capability: t.Name()}
}

// Missing lists the capabilities b lacks, in All's order, leaving out one
// whose Within capability b lacks too: that loss is already reported.
func Missing(b charts.Backend) []Descriptor {
	var out []Descriptor
	for _, d := range table {
		if d.In(b) {
			continue
		}
		if w, ok := Lookup(d.Within); ok && !w.In(b) {
			continue
		}
		out = append(out, d)
	}
	return out
}
