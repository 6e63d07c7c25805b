package api_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/metrics"
)

const webhookSecret = "whsec-7f3a9c2e5b8d1f4a6c0e"

// hookController adds WebhookTargets to the fake, and can make Refresh fail.
type hookController struct {
	*apitest.Controller
	targets  []api.WebhookTarget
	failures atomic.Int32 // how many more Refresh calls fail
}

var _ api.WebhookTargets = (*hookController)(nil)

func (c *hookController) WebhookTargets() []api.WebhookTarget { return c.targets }

func (c *hookController) Refresh(name string) error {
	if c.failures.Add(-1) >= 0 {
		return errors.New("refresh queue is full")
	}
	return c.Controller.Refresh(name)
}

// platformTargets is a monorepo on host with an application per directory,
// each spelling the repository URL its own way, plus a second repository.
func platformTargets(host string) []api.WebhookTarget {
	https := "https://" + host + "/acme/platform.git"
	return []api.WebhookTarget{
		{App: "shop", RepoURL: https, Revision: "main", Path: "shop"},
		{App: "billing", RepoURL: "git@" + host + ":acme/platform.git", Revision: "main", Path: "billing"},
		{App: "site", RepoURL: "https://" + strings.ToUpper(host) + "/acme/platform", Revision: "HEAD", Path: "site"},
		{App: "shop-staging", RepoURL: https, Revision: "staging", Path: "shop"},
		{App: "shop-release", RepoURL: https, Revision: "v2.0.0", Path: "./shop/"},
		{App: "pinned", RepoURL: https, Revision: "0123456789abcdef0123456789abcdef01234567", Path: "."},
		{App: "other", RepoURL: "https://" + host + "/acme/other.git", Revision: "main", Path: "."},
	}
}

type hookEnv struct {
	srv     *httptest.Server
	ctl     *hookController
	metrics *metrics.Metrics
	logs    *syncBuffer
}

// newHookEnv serves the API with every provider enabled and the platform
// applications on host; mod may change the options.
func newHookEnv(t *testing.T, host string, mod func(*api.Options)) *hookEnv {
	t.Helper()
	targets := platformTargets(host)
	var statuses []application.Status
	for _, tg := range targets {
		statuses = append(statuses, application.Status{Name: tg.App, Stack: tg.App})
	}
	secrets := api.WebhookSecrets{}
	for _, p := range api.WebhookProviders() {
		secrets[p] = webhookSecret
	}
	e := &hookEnv{
		ctl:     &hookController{Controller: apitest.NewController(statuses...), targets: targets},
		metrics: metrics.New(),
		logs:    &syncBuffer{},
	}
	opts := api.Options{
		Controller: e.ctl,
		Metrics:    e.metrics,
		Logger:     slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Tokens:     api.Tokens{{Name: "admin", Role: access.Admin, Secret: adminToken}},
		Webhooks:   api.WebhookOptions{Secrets: secrets},
	}
	if mod != nil {
		mod(&opts)
	}
	e.srv = httptest.NewServer(api.New(opts))
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", e.logs)
		}
	})
	return e
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "webhooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hmacHex(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// delivery builds the headers provider sends with a push delivery of body,
// signed with secret ("" for unsigned) and carrying delivery id.
func delivery(provider api.WebhookProvider, secret, id string, body []byte) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	set := func(k, v string) {
		if v != "" {
			h.Set(k, v)
		}
	}
	sig := ""
	if secret != "" {
		sig = hmacHex(secret, body)
	}
	prefixed := func(prefix string) string {
		if sig == "" {
			return ""
		}
		return prefix + sig
	}
	switch provider {
	case api.ProviderGitHub:
		h.Set("X-GitHub-Event", "push")
		set("X-GitHub-Delivery", id)
		set("X-Hub-Signature-256", prefixed("sha256="))
	case api.ProviderGitLab:
		h.Set("X-Gitlab-Event", "Push Hook")
		set("X-Gitlab-Event-UUID", id)
		set("X-Gitlab-Token", secret)
	case api.ProviderGitea:
		h.Set("X-Gitea-Event", "push")
		set("X-Gitea-Delivery", id)
		set("X-Gitea-Signature", sig)
	case api.ProviderBitbucket:
		h.Set("X-Event-Key", "repo:push")
		set("X-Request-UUID", id)
		set("X-Hub-Signature", prefixed("sha256="))
	case api.ProviderGeneric:
		set("X-Flotilla-Signature", prefixed("sha256="))
	}
	return h
}

func (e *hookEnv) post(t *testing.T, provider api.WebhookProvider, h http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+"/api/v1/webhooks/"+string(provider), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// push delivers body, correctly signed, and returns the status and answer.
func (e *hookEnv) push(t *testing.T, provider api.WebhookProvider, id string, body []byte) (int, api.WebhookResponse) {
	t.Helper()
	resp, b := e.post(t, provider, delivery(provider, webhookSecret, id, body), body)
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		t.Fatalf("%s delivery: status %d: %s", provider, resp.StatusCode, b)
	}
	return resp.StatusCode, decode[api.WebhookResponse](t, b)
}

// deliveries reads flotilla_webhook_deliveries_total{provider,result}.
func (e *hookEnv) deliveries(t *testing.T, provider api.WebhookProvider, result metrics.WebhookResult) float64 {
	t.Helper()
	mfs, err := e.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "flotilla_webhook_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == string(provider) && labels["result"] == string(result) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestWebhook_eachProviderRefreshesTheApplicationsItsPushTouched(t *testing.T) {
	cases := []struct {
		provider api.WebhookProvider
		fixture  string
		host     string
		want     []string
	}{
		// shop/ and README.md on main.
		{api.ProviderGitHub, "github-push.json", "github.com", []string{"shop"}},
		// billing/ on main; the application's URL is the ssh form.
		{api.ProviderGitLab, "gitlab-push.json", "gitlab.com", []string{"billing"}},
		// site/ on the default branch, which the HEAD application follows.
		{api.ProviderGitea, "gitea-push.json", "gitea.example.com", []string{"site"}},
		// No file lists: everything following main, HEAD included since
		// the payload does not name the default branch.
		{api.ProviderBitbucket, "bitbucket-push.json", "bitbucket.org", []string{"billing", "shop", "site"}},
		{api.ProviderGeneric, "generic-push.json", "git.example.com", []string{"shop"}},
	}
	for _, tc := range cases {
		t.Run(string(tc.provider), func(t *testing.T) {
			t.Parallel()
			e := newHookEnv(t, tc.host, nil)
			status, resp := e.push(t, tc.provider, "d-1", fixture(t, tc.fixture))
			if status != http.StatusAccepted || !slices.Equal(resp.Refreshed, tc.want) || resp.Ignored != "" {
				t.Fatalf("status %d, answer %+v; want 202 refreshing %v", status, resp, tc.want)
			}
			if got := sorted(e.ctl.Refreshed()); !slices.Equal(got, tc.want) {
				t.Errorf("controller refreshed %v, want %v", got, tc.want)
			}
			if n := e.deliveries(t, tc.provider, metrics.WebhookAccepted); n != 1 {
				t.Errorf("accepted deliveries counted %v, want 1", n)
			}
		})
	}
}

func TestWebhook_forgedSignatureIsRefusedCountedAndActsOnNothing(t *testing.T) {
	for _, p := range api.WebhookProviders() {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			e := newHookEnv(t, "github.com", nil)
			body := fixture(t, "github-push.json")
			if p == api.ProviderGeneric {
				body = []byte(`{"repository":"https://github.com/acme/platform","ref":"refs/heads/main"}`)
			}
			forged := "not-" + webhookSecret
			resp, b := e.post(t, p, delivery(p, forged, "d-1", body), body)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("forged delivery: status %d: %s", resp.StatusCode, b)
			}
			if got := e.ctl.Refreshed(); len(got) != 0 {
				t.Errorf("forged delivery refreshed %v", got)
			}
			if n := e.deliveries(t, p, metrics.WebhookRejected); n != 1 {
				t.Errorf("rejected deliveries counted %v, want 1", n)
			}
			// A body altered after signing is as forged as a wrong key.
			h := delivery(p, webhookSecret, "d-2", body)
			altered := bytes.Replace(body, []byte("refs/heads/main"), []byte("refs/heads/evil"), 1)
			if p != api.ProviderGitLab { // GitLab's token does not cover the body
				if resp, b := e.post(t, p, h, altered); resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("altered body: status %d: %s", resp.StatusCode, b)
				}
			}
			if strings.Contains(e.logs.String(), webhookSecret) || strings.Contains(e.logs.String(), hmacHex(forged, body)) {
				t.Errorf("a secret or signature reached the log:\n%s", e.logs)
			}
		})
	}
}

func TestWebhook_unsignedDeliveryIsRefusedWhenASecretIsSet(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	for _, p := range api.WebhookProviders() {
		body := fixture(t, "github-push.json")
		resp, b := e.post(t, p, delivery(p, "", "d-"+string(p), body), body)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: unsigned delivery: status %d: %s", p, resp.StatusCode, b)
		}
	}
	// A malformed signature is no better than none.
	body := fixture(t, "github-push.json")
	h := delivery(api.ProviderGitHub, webhookSecret, "d-x", body)
	h.Set("X-Hub-Signature-256", "sha1="+hmacHex(webhookSecret, body))
	if resp, b := e.post(t, api.ProviderGitHub, h, body); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("sha1 signature: status %d: %s", resp.StatusCode, b)
	}
	if got := e.ctl.Refreshed(); len(got) != 0 {
		t.Errorf("unsigned deliveries refreshed %v", got)
	}
}

func TestWebhook_providerWithoutSecretIsDisabled(t *testing.T) {
	e := newHookEnv(t, "github.com", func(o *api.Options) {
		o.Webhooks.Secrets = api.WebhookSecrets{api.ProviderGitHub: webhookSecret}
	})
	body := fixture(t, "gitlab-push.json")
	resp, b := e.post(t, api.ProviderGitLab, delivery(api.ProviderGitLab, webhookSecret, "d-1", body), body)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "disabled") {
		t.Fatalf("disabled provider: status %d: %s", resp.StatusCode, b)
	}
	if got := e.ctl.Refreshed(); len(got) != 0 {
		t.Errorf("disabled provider refreshed %v", got)
	}
	if resp, b := e.post(t, "svn", http.Header{}, body); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown provider: status %d: %s", resp.StatusCode, b)
	}
}

func TestWebhook_oversizedBodyIs413BeforeVerification(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	big := bytes.Repeat([]byte(" "), api.DefaultWebhookMaxBody+1)
	for _, p := range api.WebhookProviders() {
		resp, b := e.post(t, p, delivery(p, webhookSecret, "d-big", big), big)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: oversized body: status %d: %s", p, resp.StatusCode, b)
		}
		if n := e.deliveries(t, p, metrics.WebhookRejected); n != 1 {
			t.Errorf("%s: rejected deliveries counted %v, want 1", p, n)
		}
	}
	// The limit is configurable.
	small := newHookEnv(t, "github.com", func(o *api.Options) { o.Webhooks.MaxBody = 64 })
	body := fixture(t, "generic-push.json")
	if resp, b := small.post(t, api.ProviderGeneric, delivery(api.ProviderGeneric, webhookSecret, "", body), body); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("64-byte limit: status %d: %s", resp.StatusCode, b)
	}
}

func TestWebhook_replayedDeliveryIs409AndNotActedUpon(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	body := fixture(t, "github-push.json")
	e.push(t, api.ProviderGitHub, "72d3162e-cc78-11e3-81ab-4c9367dc0958", body)

	replays := []struct {
		name string
		id   string
		body []byte
	}{
		{"same id and body", "72d3162e-cc78-11e3-81ab-4c9367dc0958", body},
		// The id header is not signed: a captured body under a new id is
		// still a replay.
		{"same body under a new id", "0b8e1c7a-0000-4000-8000-000000000001", body},
		{"same id, another body", "72d3162e-cc78-11e3-81ab-4c9367dc0958", bytes.Replace(body, []byte(`"forced": false`), []byte(`"forced":false`), 1)},
	}
	for _, r := range replays {
		resp, b := e.post(t, api.ProviderGitHub, delivery(api.ProviderGitHub, webhookSecret, r.id, r.body), r.body)
		if resp.StatusCode != http.StatusConflict {
			t.Errorf("%s: status %d: %s", r.name, resp.StatusCode, b)
		}
	}
	if got := e.ctl.Refreshed(); !slices.Equal(got, []string{"shop"}) {
		t.Errorf("refreshed %v, want shop once", got)
	}
	if n := e.deliveries(t, api.ProviderGitHub, metrics.WebhookRejected); n != 3 {
		t.Errorf("rejected deliveries counted %v, want 3", n)
	}

	// Without an id the body alone recognises a replay.
	gen := fixture(t, "generic-push.json")
	noID := bytes.Replace(gen, []byte(`"id": "ci-run-8812-1"`), []byte(`"id": ""`), 1)
	e.push(t, api.ProviderGeneric, "", noID)
	if resp, b := e.post(t, api.ProviderGeneric, delivery(api.ProviderGeneric, webhookSecret, "", noID), noID); resp.StatusCode != http.StatusConflict {
		t.Errorf("generic replay without id: status %d: %s", resp.StatusCode, b)
	}
	// A generic id is in the signed body, so another body with it is a replay.
	e.push(t, api.ProviderGeneric, "", gen)
	sameID := bytes.Replace(gen, []byte("shop/x.yml"), []byte("shop/y.yml"), 1)
	if resp, b := e.post(t, api.ProviderGeneric, delivery(api.ProviderGeneric, webhookSecret, "", sameID), sameID); resp.StatusCode != http.StatusConflict {
		t.Errorf("generic replay of id: status %d: %s", resp.StatusCode, b)
	}
}

func TestWebhook_failedRefreshCanBeRedelivered(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	e.ctl.failures.Store(1)
	body := fixture(t, "github-push.json")
	h := delivery(api.ProviderGitHub, webhookSecret, "d-retry", body)
	if resp, b := e.post(t, api.ProviderGitHub, h, body); resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("failing refresh: status %d: %s", resp.StatusCode, b)
	}
	if status, resp := e.push(t, api.ProviderGitHub, "d-retry", body); status != http.StatusAccepted || !slices.Equal(resp.Refreshed, []string{"shop"}) {
		t.Errorf("redelivery after a failure: %d %+v", status, resp)
	}
}

func TestWebhook_monorepoPushTouchingOneAppPathRefreshesOnlyThatApp(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	// billing's repoURL is the ssh form; the payload's clone_url is https.
	body := bytes.ReplaceAll(fixture(t, "github-push.json"), []byte(`"shop/`), []byte(`"billing/`))
	_, resp := e.push(t, api.ProviderGitHub, "d-1", body)
	if !slices.Equal(resp.Refreshed, []string{"billing"}) {
		t.Fatalf("refreshed %v, want billing only", resp.Refreshed)
	}
	// A directory whose name merely starts like an application's is not it.
	body = bytes.ReplaceAll(fixture(t, "github-push.json"), []byte(`"shop/`), []byte(`"shopping/`))
	status, resp := e.push(t, api.ProviderGitHub, "d-2", body)
	if status != http.StatusOK || len(resp.Refreshed) != 0 || !strings.Contains(resp.Ignored, "path") {
		t.Errorf("push to shopping/: %d %+v", status, resp)
	}
	if got := e.ctl.Refreshed(); !slices.Equal(got, []string{"billing"}) {
		t.Errorf("controller refreshed %v, want billing", got)
	}
}

func TestWebhook_pushToAnotherBranchRefreshesNothing(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	body := bytes.Replace(fixture(t, "github-push.json"), []byte(`"ref": "refs/heads/main"`), []byte(`"ref": "refs/heads/feature/x"`), 1)
	status, resp := e.push(t, api.ProviderGitHub, "d-1", body)
	if status != http.StatusOK || len(resp.Refreshed) != 0 || !strings.Contains(resp.Ignored, "refs/heads/feature/x") {
		t.Fatalf("push to feature/x: %d %+v", status, resp)
	}
	if got := e.ctl.Refreshed(); len(got) != 0 {
		t.Errorf("refreshed %v", got)
	}
	if n := e.deliveries(t, api.ProviderGitHub, metrics.WebhookIgnored); n != 1 {
		t.Errorf("ignored deliveries counted %v, want 1", n)
	}
}

func TestWebhook_branchAndTagRevisions(t *testing.T) {
	cases := []struct {
		name, ref string
		touched   string
		want      []string
	}{
		// HEAD follows main, the default branch the payload names.
		{"default branch", "refs/heads/main", "site/", []string{"site"}},
		{"HEAD ignores other branches", "refs/heads/staging", "site/", nil},
		{"named branch", "refs/heads/staging", "shop/", []string{"shop-staging"}},
		// A tag has no changed files worth trusting: every app on it.
		{"tag", "refs/tags/v2.0.0", "README", []string{"shop-release"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newHookEnv(t, "github.com", nil)
			body := fixture(t, "github-push.json")
			body = bytes.Replace(body, []byte(`"ref": "refs/heads/main"`), []byte(`"ref": "`+tc.ref+`"`), 1)
			body = bytes.ReplaceAll(body, []byte(`"shop/`), []byte(`"`+tc.touched))
			_, resp := e.push(t, api.ProviderGitHub, "d-1", body)
			if !slices.Equal(resp.Refreshed, tc.want) {
				t.Errorf("refreshed %v, want %v (%s)", resp.Refreshed, tc.want, resp.Ignored)
			}
		})
	}
}

func TestWebhook_truncatedCommitListRefreshesEveryAppOnTheBranch(t *testing.T) {
	e := newHookEnv(t, "gitlab.com", nil)
	body := bytes.Replace(fixture(t, "gitlab-push.json"), []byte(`"total_commits_count": 2`), []byte(`"total_commits_count": 45`), 1)
	_, resp := e.push(t, api.ProviderGitLab, "d-1", body)
	if want := []string{"billing", "shop", "site"}; !slices.Equal(resp.Refreshed, want) {
		t.Errorf("refreshed %v, want %v", resp.Refreshed, want)
	}
}

func TestWebhook_sshAndHTTPSFormsOfTheRepositoryMatch(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	// shop's repoURL is https://github.com/acme/platform.git.
	for i, repo := range []string{"ssh://git@github.com/acme/platform", "git@GitHub.com:acme/platform.git", "https://github.com/acme/platform/"} {
		body := fmt.Appendf(nil, `{"repository": %q, "ref": "main", "paths": ["shop/compose.yml"], "id": "ci-%d"}`, repo, i)
		if _, resp := e.push(t, api.ProviderGeneric, "", body); !slices.Equal(resp.Refreshed, []string{"shop"}) {
			t.Errorf("%s: refreshed %v (%s)", repo, resp.Refreshed, resp.Ignored)
		}
	}
	body := []byte(`{"repository": "https://github.com/acme/platform-old", "ref": "main", "id": "ci-x"}`)
	if _, resp := e.push(t, api.ProviderGeneric, "", body); len(resp.Refreshed) != 0 {
		t.Errorf("another repository refreshed %v", resp.Refreshed)
	}
}

func TestWebhook_nonPushEventsAreIgnored(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	body := fixture(t, "github-ping.json")
	h := delivery(api.ProviderGitHub, webhookSecret, "d-ping", body)
	h.Set("X-GitHub-Event", "ping")
	resp, b := e.post(t, api.ProviderGitHub, h, body)
	answer := decode[api.WebhookResponse](t, b)
	if resp.StatusCode != http.StatusOK || !strings.Contains(answer.Ignored, "ping") || answer.Refreshed == nil {
		t.Fatalf("ping: status %d: %s", resp.StatusCode, b)
	}
	if got := e.ctl.Refreshed(); len(got) != 0 {
		t.Errorf("ping refreshed %v", got)
	}
	// Deleting a branch is a push with nothing to fetch.
	del := bytes.Replace(fixture(t, "github-push.json"), []byte(`"deleted": false`), []byte(`"deleted": true`), 1)
	if status, answer := e.push(t, api.ProviderGitHub, "d-del", del); status != http.StatusOK || len(answer.Refreshed) != 0 {
		t.Errorf("branch deletion: %d %+v", status, answer)
	}
}

func TestWebhook_invalidPayloadIs400(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	for _, body := range []string{`{"ref": 7}`, `{"repository": "https://github.com/acme/platform"}`, `{"repository": "x", "ref": "main", "extra": 1}`} {
		resp, b := e.post(t, api.ProviderGeneric, delivery(api.ProviderGeneric, webhookSecret, "", []byte(body)), []byte(body))
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d: %s", body, resp.StatusCode, b)
		}
	}
	if n := e.deliveries(t, api.ProviderGeneric, metrics.WebhookInvalid); n != 3 {
		t.Errorf("invalid deliveries counted %v, want 3", n)
	}
}

func TestWebhook_formEncodedGitHubDelivery(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	body := []byte(url.Values{"payload": {string(fixture(t, "github-push.json"))}}.Encode())
	h := delivery(api.ProviderGitHub, webhookSecret, "d-form", body)
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, b := e.post(t, api.ProviderGitHub, h, body)
	if resp.StatusCode != http.StatusAccepted || !slices.Equal(decode[api.WebhookResponse](t, b).Refreshed, []string{"shop"}) {
		t.Fatalf("form delivery: status %d: %s", resp.StatusCode, b)
	}
}

func TestWebhook_takesNoBearerTokenAndOpensNothingElse(t *testing.T) {
	e := newHookEnv(t, "github.com", nil)
	e.push(t, api.ProviderGitHub, "d-1", fixture(t, "github-push.json")) // no Authorization header

	client := e.srv.Client()
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/api/v1/applications/shop/refresh"},
		{http.MethodGet, "/api/v1/webhooks/github"},
		{http.MethodPost, "/api/v1/webhooks/github/extra"},
		{http.MethodPost, "/api/v1/webhooks/../applications/shop/sync"},
		{http.MethodPost, "/api/v1/webhooks/..%2Fapplications%2Fshop%2Fsync"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), r.method, e.srv.URL+r.path, strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s without a token: status %d", r.method, r.path, resp.StatusCode)
		}
	}
	if got := e.ctl.Refreshed(); !slices.Equal(got, []string{"shop"}) {
		t.Errorf("refreshed %v, want only the webhook's shop", got)
	}
	if len(e.ctl.Syncs()) != 0 {
		t.Errorf("a sync was requested without a token: %v", e.ctl.Syncs())
	}
}

func TestWebhook_controllerWithoutTargetsAnswers501(t *testing.T) {
	e := newHookEnv(t, "github.com", func(o *api.Options) {
		o.Controller = apitest.NewController(application.Status{Name: "shop"})
	})
	body := fixture(t, "github-push.json")
	resp, b := e.post(t, api.ProviderGitHub, delivery(api.ProviderGitHub, webhookSecret, "d-1", body), body)
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(b), "WebhookTargets") {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !strings.Contains(e.logs.String(), "webhooks cannot be routed") {
		t.Errorf("the lost feature was not logged at start:\n%s", e.logs)
	}
}

func TestWebhookSecretsFromEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gitlab")
	if err := os.WriteFile(file, []byte("gitlab-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(api.EnvWebhookSecret, "shared-secret")
	_, gitlabFile := api.WebhookSecretEnv(api.ProviderGitLab)
	t.Setenv(gitlabFile, file)

	ws, err := api.WebhookSecretsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if ws[api.ProviderGitLab] != "gitlab-token" || ws[api.ProviderGitHub] != "shared-secret" || len(ws) != 5 {
		t.Errorf("secrets for %v", ws.Enabled())
	}
	for _, shown := range []string{fmt.Sprint(ws), fmt.Sprintf("%#v", ws)} {
		if strings.Contains(shown, "shared-secret") || strings.Contains(shown, "gitlab-token") {
			t.Errorf("printing the secrets shows them: %s", shown)
		}
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "webhooks", ws)
	if strings.Contains(logged.String(), "shared-secret") {
		t.Errorf("logging the secrets shows them: %s", logged.String())
	}

	gitlabValue, _ := api.WebhookSecretEnv(api.ProviderGitLab)
	t.Setenv(gitlabValue, "also-set")
	if _, err := api.WebhookSecretsFromEnv(); err == nil {
		t.Error("both FLOTILLA_WEBHOOK_GITLAB_SECRET and its _FILE set: accepted")
	}
}

func TestWebhookSecretsFromEnv_noneDisablesEverything(t *testing.T) {
	for _, p := range api.WebhookProviders() {
		v, f := api.WebhookSecretEnv(p)
		t.Setenv(v, "")
		t.Setenv(f, "")
	}
	t.Setenv(api.EnvWebhookSecret, "")
	t.Setenv(api.EnvWebhookSecretFile, "")
	ws, err := api.WebhookSecretsFromEnv()
	if err != nil || len(ws.Enabled()) != 0 {
		t.Errorf("secrets %v, %v; want none", ws, err)
	}
}

func TestNewWebhookTarget(t *testing.T) {
	app := application.Application{Name: "shop", Source: application.Source{
		RepoURL: "https://github.com/acme/platform", Revision: "main", Path: "apps/shop",
		Compose: application.Compose{
			Files:    []string{"compose.yml", "../../common/base.yml", "../../common/base.yml"},
			EnvFiles: []string{"../shared.env"},
		},
	}}
	got := api.NewWebhookTarget(app)
	want := api.WebhookTarget{App: "shop", RepoURL: "https://github.com/acme/platform", Revision: "main", Path: "apps/shop",
		ExtraPaths: []string{"common/base.yml", "apps/shared.env"}}
	if got.App != want.App || got.Path != want.Path || got.Revision != want.Revision || !slices.Equal(got.ExtraPaths, want.ExtraPaths) {
		t.Errorf("NewWebhookTarget = %+v, want %+v", got, want)
	}
}

func TestNewWebhookTarget_chartValueFilesOutsideThePathCount(t *testing.T) {
	app := application.Application{Name: "shop-eu", Source: application.Source{
		RepoURL: "https://github.com/acme/platform", Revision: "main", Path: "charts/shop",
		Chart: &application.Chart{ValueFiles: []string{"values-eu.yaml", "../../customers/eu.yaml"}},
	}}
	if got := api.NewWebhookTarget(app).ExtraPaths; !slices.Equal(got, []string{"customers/eu.yaml"}) {
		t.Errorf("ExtraPaths = %v", got)
	}
}

func TestWebhook_gitLabTagPushRefreshesAppsTrackingTheTag(t *testing.T) {
	e := newHookEnv(t, "gitlab.com", nil)
	body := bytes.Replace(fixture(t, "gitlab-push.json"), []byte(`"ref": "refs/heads/main"`), []byte(`"ref": "refs/tags/v2.0.0"`), 1)
	body = bytes.Replace(body, []byte(`"object_kind": "push"`), []byte(`"object_kind": "tag_push"`), 1)
	h := delivery(api.ProviderGitLab, webhookSecret, "d-tag", body)
	h.Set("X-Gitlab-Event", "Tag Push Hook")
	resp, b := e.post(t, api.ProviderGitLab, h, body)
	if resp.StatusCode != http.StatusAccepted || !slices.Equal(decode[api.WebhookResponse](t, b).Refreshed, []string{"shop-release"}) {
		t.Fatalf("tag push: status %d: %s", resp.StatusCode, b)
	}
}
