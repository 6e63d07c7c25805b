package reconcile

import (
	"context"

	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/source"
)

// Fetcher is what the reconciler needs from git: the tree of one revision.
// *source.Fetcher implements it.
type Fetcher interface {
	Fetch(ctx context.Context, req source.Request) (*source.Revision, error)
}

// Renderer turns a directory of a checkout into a manifest. compose.Render
// is the one the controller uses.
type Renderer func(stack string, d compose.Dir) (*compose.Rendered, error)
