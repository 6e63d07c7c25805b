package reconcile

import (
	"fmt"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/regauth"
)

// unavailable lists the features backend b cannot offer, in the words the
// status shows; nil for a destination with no backend, whose passes fail.
// The list is capability.Missing's: every capability in the table that b
// lacks, less those refining one it lacks as well.
func (c *Controller) unavailable(b charts.Backend) []string {
	if b == nil {
		return nil
	}
	var out []string
	for _, d := range capability.Missing(b) {
		out = append(out, d.Unavailable().Error())
	}
	return out
}

// appBackend decorates the controller's backend for one pass of one
// application. If the backend implements OutOfBand, a lost compare-and-swap
// is reported against this application; otherwise such races are retried
// without a report (and the status lists the feature as unavailable).
//
// The same holds for the application's allowlist (AllowedReferences), the
// controller's own secrets (ForbidSecrets) and the application's registry
// credential (RegistryAuth): a backend that lacks one enforces its own rules
// or authenticates its own way, and the reconciler never loosens anything.
func (c *Controller) appBackend(p *pass) (charts.Backend, error) {
	b := p.base
	if ob, ok := capability.As[capability.OutOfBand](b); ok {
		b = ob.WithOutOfBandNotifier(c.outOfBand(p))
	}
	if ar, ok := capability.As[capability.AllowedReferences](b); ok {
		b = ar.WithAllowedReferences(p.app.Allow)
	}
	if fs, ok := capability.As[capability.ForbidSecrets](b); ok && len(c.opts.ForbiddenSecrets) > 0 {
		b = fs.WithForbiddenSecrets(c.opts.ForbiddenSecrets)
	}
	if ra := p.app.RegistryAuth; ra != nil {
		r, ok := capability.As[capability.RegistryAuth](b)
		if !ok {
			return nil, stalled("credentials", capability.Lost[capability.RegistryAuth]())
		}
		creds, err := regauth.FromFile(ra.Path())
		if err != nil {
			return nil, stalled("credentials", fmt.Errorf("registryAuth: %w", err))
		}
		b = r.WithRegistryAuth(creds)
	}
	return b, nil
}
