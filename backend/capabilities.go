package backend

import (
	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
)

// Every capability the Backend implements, in capability.All's order. A test
// (TestBackendClaimsEveryCapabilityItImplements) reads this block and fails
// when a capability the Backend implements is missing from it.
var (
	_ charts.Backend = (*Backend)(nil)

	_ capability.StacksReader        = (*Backend)(nil)
	_ capability.StackServicesReader = (*Backend)(nil)
	_ capability.LiveDrift           = (*Backend)(nil)
	_ capability.NetworkNamer        = (*Backend)(nil)
	_ capability.OutOfBand           = (*Backend)(nil)
	_ capability.DeclaredLister      = (*Backend)(nil)
	_ capability.ResourceLister      = (*Backend)(nil)
	_ capability.ResourceRemover     = (*Backend)(nil)
	_ capability.SwarmSizer          = (*Backend)(nil)
	_ capability.SwarmNodeNamer      = (*Backend)(nil)
	_ capability.AllowedReferences   = (*Backend)(nil)
	_ capability.ForbidSecrets       = (*Backend)(nil)
	_ capability.RegistryAuth        = (*Backend)(nil)
	_ capability.ReleaseLister       = (*Backend)(nil)
	_ capability.ReleaseHead         = (*Backend)(nil)
	_ capability.LiveServicesBatch   = (*Backend)(nil)
	_ capability.LiveStacksReader    = (*Backend)(nil)
	_ capability.ReleaseHeads        = (*Backend)(nil)
	_ capability.OwnerStamps         = (*Backend)(nil)
	_ capability.LiveResources       = (*Backend)(nil)
	_ capability.NotKeptMemory       = (*Backend)(nil)
	_ capability.VolumeSweeper       = (*Backend)(nil)
	_ capability.ServiceLogs         = (*Backend)(nil)
	_ capability.StackLogs           = (*Backend)(nil)
	_ capability.APIVersioner        = (*Backend)(nil)
)
