package reconcile

import (
	"fmt"
	"net/url"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/rollout"
)

// analysisGranted refuses a rollout whose analysis calls a URL the
// application's allow.analysisURLs does not grant. The analysis runs in the
// controller, so a URL written in the repository would otherwise let its
// author make the controller call (and report on) anything it can reach:
// a cloud metadata endpoint, the Docker API on a TCP port, an admin page.
// The check runs before the step decides or deploys anything.
func analysisGranted(allow *application.Allow, svc string, spec rollout.Spec) error {
	a := spec.Analysis
	if a == nil {
		return nil
	}
	var calls []struct{ field, url string }
	if a.Traefik != nil {
		calls = append(calls, struct{ field, url string }{"analysis.traefik.metrics", a.Traefik.Metrics})
	}
	if a.Prometheus != nil {
		calls = append(calls, struct{ field, url string }{"analysis.prometheus.address", a.Prometheus.Address})
	}
	if a.Webhook != nil {
		calls = append(calls, struct{ field, url string }{"analysis.webhook.url", a.Webhook.URL})
	}
	for _, c := range calls {
		if !allow.AdmitsAnalysisURL(c.url) {
			return fmt.Errorf("manifest: services.%s.%s.rollout.%s: %s is not granted by this application's allow.analysisURLs in the applications file (the controller makes the call from its own network, so each prefix is granted there)",
				svc, compose.Extension, c.field, shownURL(c.url))
		}
	}
	return nil
}

// shownURL is raw as an error may show it: scheme, host and path, without
// the credentials, query or fragment a URL can carry a token in.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "the URL"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
