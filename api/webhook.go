package api

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/source"
)

// Push webhooks: POST /api/v1/webhooks/{provider}.
//
// A delivery is answered in this order, and the first step that refuses
// ends it:
//
//  1. the provider is one of WebhookProviders, else 404;
//  2. the sender's address has a token left in its bucket
//     (WebhookOptions.RatePerSecond, RateBurst), else 429 with Retry-After;
//  3. the provider has a secret, else 404 (a provider is never served
//     unsigned);
//  4. the provider's signature or token header is present, else 401;
//  5. the body fits WebhookOptions.MaxBody, else 413 (by Content-Length
//     when it is sent, without reading anything);
//  6. the signature or token verifies, else 401;
//  7. the event is a push, else 200 "ignored";
//  8. the payload parses, else 400;
//  9. neither the delivery id nor the body was seen within the replay
//     window, else 409;
//  10. the applications whose repository, revision and path the push
//     touched are refreshed: 202 with their names, or 200 "ignored" with
//     the reason none matched.
//
// The body is read at step 5 and not before: a request that is not a
// plausible delivery to an enabled provider costs the controller its
// headers only.
//
// The signature is the authentication, so these routes take no bearer
// token; New routes them around the authentication middleware, and nothing
// else goes that way.
//
// Replays. GitHub, Gitea and Bitbucket sign only the body, not the header
// carrying the delivery id, so a captured delivery could be resent under a
// fresh id. The replay cache therefore remembers the body's digest as well
// as the id, and refuses either one seen again. Push bodies name the
// commits they carry, so two honest deliveries never share one. A delivery
// without an id (allowed, since some senders have none) is deduplicated by
// its body alone. The cache is bounded: past WebhookOptions.ReplayCache
// entries the oldest are forgotten early, which only someone holding the
// secret can force.

// WebhookProvider names a forge whose push webhooks the API accepts. It is
// the last element of the webhook's path.
type WebhookProvider string

// Webhook providers.
const (
	// ProviderGitHub: X-Hub-Signature-256 "sha256=<hex HMAC-SHA256>".
	ProviderGitHub WebhookProvider = "github"
	// ProviderGitLab: X-Gitlab-Token holding the secret itself.
	ProviderGitLab WebhookProvider = "gitlab"
	// ProviderGitea: X-Gitea-Signature "<hex HMAC-SHA256>".
	ProviderGitea WebhookProvider = "gitea"
	// ProviderBitbucket (Bitbucket Cloud): X-Hub-Signature "sha256=<hex>".
	ProviderBitbucket WebhookProvider = "bitbucket"
	// ProviderGeneric: X-Flotilla-Signature "sha256=<hex>" over a
	// GenericPush body, for CI jobs and forges without their own entry.
	ProviderGeneric WebhookProvider = "generic"
)

// WebhookProviders returns every provider, in the order they are documented.
func WebhookProviders() []WebhookProvider {
	return []WebhookProvider{ProviderGitHub, ProviderGitLab, ProviderGitea, ProviderBitbucket, ProviderGeneric}
}

// GenericPush is the body of a generic webhook delivery.
type GenericPush struct {
	// Repository is the pushed repository's URL, in any form an
	// application's repoURL may take. Required.
	Repository string `json:"repository"`
	// Ref is the updated ref, such as "refs/heads/main" or "refs/tags/v1";
	// a bare name is taken as a branch. Required.
	Ref string `json:"ref"`
	// Paths are the repository paths the push changed. Absent or empty
	// means unknown: every application on the repository and ref is
	// refreshed.
	Paths []string `json:"paths,omitempty"`
	// ID identifies the delivery for replay protection. Optional; without
	// it a replay is recognised by its body only.
	ID string `json:"id,omitempty"`
}

// WebhookSecrets holds each enabled provider's secret: the HMAC key, or for
// GitLab the token itself. A provider without one is disabled. Printing or
// logging it shows only which providers are enabled.
type WebhookSecrets map[WebhookProvider]string

// Enabled returns the providers that have a secret.
func (ws WebhookSecrets) Enabled() []WebhookProvider {
	var out []WebhookProvider
	for _, p := range WebhookProviders() {
		if ws[p] != "" {
			out = append(out, p)
		}
	}
	return out
}

func (ws WebhookSecrets) String() string {
	ps := ws.Enabled()
	if len(ps) == 0 {
		return "webhooks disabled"
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = string(p)
	}
	return "webhooks enabled for " + strings.Join(names, ", ")
}

// GoString keeps %#v from printing the secrets.
func (ws WebhookSecrets) GoString() string { return ws.String() }

// LogValue keeps slog from printing the secrets.
func (ws WebhookSecrets) LogValue() slog.Value { return slog.StringValue(ws.String()) }

// Environment variables WebhookSecretsFromEnv reads. The shared secret
// serves every provider; WebhookSecretEnv names each provider's own, which
// takes precedence. As with tokens, a *_FILE variable names a file holding
// the secret, and secrets never come from argv.
const (
	EnvWebhookSecret     = "FLOTILLA_WEBHOOK_SECRET"
	EnvWebhookSecretFile = "FLOTILLA_WEBHOOK_SECRET_FILE"
)

// WebhookSecretEnv returns the variables holding p's own secret, such as
// FLOTILLA_WEBHOOK_GITHUB_SECRET and FLOTILLA_WEBHOOK_GITHUB_SECRET_FILE.
func WebhookSecretEnv(p WebhookProvider) (value, file string) {
	v := "FLOTILLA_WEBHOOK_" + strings.ToUpper(string(p)) + "_SECRET"
	return v, v + "_FILE"
}

// WebhookSecretsFromEnv loads the webhook secrets from the environment. No
// secret at all is valid and leaves every webhook disabled.
func WebhookSecretsFromEnv() (WebhookSecrets, error) {
	return webhookSecretsFrom(os.Getenv, os.ReadFile)
}

func webhookSecretsFrom(getenv func(string) string, readFile func(string) ([]byte, error)) (WebhookSecrets, error) {
	shared, err := tokenFrom(getenv, readFile, EnvWebhookSecret, EnvWebhookSecretFile)
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	ws := WebhookSecrets{}
	for _, p := range WebhookProviders() {
		value, file := WebhookSecretEnv(p)
		own, err := tokenFrom(getenv, readFile, value, file)
		if err != nil {
			return nil, fmt.Errorf("%s webhook secret: %w", p, err)
		}
		if own == "" {
			own = shared
		}
		if own != "" {
			ws[p] = own
		}
	}
	return ws, nil
}

// WebhookOptions configure the webhook routes.
type WebhookOptions struct {
	// Secrets enable providers (see WebhookSecretsFromEnv). Default: none,
	// every provider answers 404.
	Secrets WebhookSecrets
	// MaxBody bounds a delivery's body in bytes; a larger one is refused
	// with 413 before any verification. Default 1 MiB.
	MaxBody int64
	// ReplayCache is how many deliveries are remembered for refusing
	// replays. Default 10,000.
	ReplayCache int
	// ReplayWindow is how long a delivery is remembered. Default 24h.
	ReplayWindow time.Duration
	// RatePerSecond and RateBurst are the token bucket each source address
	// gets: deliveries past it are refused with 429 before anything else
	// is looked at. Default 5 per second with bursts of 30, far above what
	// a forge sends for one busy repository. A negative rate turns the
	// limit off.
	RatePerSecond float64
	RateBurst     int
}

// Defaults for WebhookOptions.
const (
	DefaultWebhookMaxBody       = 1 << 20
	DefaultWebhookReplayCache   = 10_000
	DefaultWebhookReplayWindow  = 24 * time.Hour
	DefaultWebhookRatePerSecond = 5
	DefaultWebhookRateBurst     = 30
)

func (o WebhookOptions) withDefaults() WebhookOptions {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultWebhookMaxBody
	}
	if o.ReplayCache <= 0 {
		o.ReplayCache = DefaultWebhookReplayCache
	}
	if o.ReplayWindow <= 0 {
		o.ReplayWindow = DefaultWebhookReplayWindow
	}
	if o.RatePerSecond == 0 {
		o.RatePerSecond = DefaultWebhookRatePerSecond
	}
	if o.RateBurst <= 0 {
		o.RateBurst = DefaultWebhookRateBurst
	}
	return o
}

// WebhookTargets lists what a push could concern: every application's
// source. It is what lets a webhook refresh only the applications a push
// touched; a controller without it answers every webhook with 501, leaving
// polling to notice pushes.
type WebhookTargets interface {
	WebhookTargets() []WebhookTarget
}

// WebhookTarget is one application's source, as webhooks match it.
type WebhookTarget struct {
	App string
	// RepoURL is compared with source.SameRepository.
	RepoURL string
	// Revision is a branch, tag, full ref, "HEAD" (or empty, the same) or
	// a commit SHA, which no push moves.
	Revision string
	// Path is the application's directory; "" or "." is the whole
	// repository.
	Path string
	// ExtraPaths are further repository paths the application reads, such
	// as compose or env files outside Path; a push touching one refreshes
	// the application too. NewWebhookTarget fills them in.
	ExtraPaths []string
}

// NewWebhookTarget describes app's source, including the compose, env and
// chart value files it names outside its path.
func NewWebhookTarget(app application.Application) WebhookTarget {
	src := app.Source
	t := WebhookTarget{App: app.Name, RepoURL: src.RepoURL, Revision: src.Revision, Path: cleanRepoPath(src.Path)}
	files := slices.Concat(src.Compose.Files, src.Compose.EnvFiles)
	if src.Chart != nil {
		files = append(files, src.Chart.ValueFiles...)
	}
	for _, f := range files {
		p := cleanRepoPath(path.Join(t.Path, f))
		if !under(p, t.Path) && !slices.Contains(t.ExtraPaths, p) {
			t.ExtraPaths = append(t.ExtraPaths, p)
		}
	}
	return t
}

// ValuesWebhookTarget describes the git repository of app's chart values
// (source.values), if it names one: a push touching one of its files
// refreshes app, as a push to the chart's own repository does.
func ValuesWebhookTarget(app application.Application) (WebhookTarget, bool) {
	v := app.Source.Values
	if v == nil || len(v.Files) == 0 {
		return WebhookTarget{}, false
	}
	t := WebhookTarget{App: app.Name, RepoURL: v.RepoURL, Revision: v.Revision, Path: cleanRepoPath(v.Files[0])}
	for _, f := range v.Files[1:] {
		if p := cleanRepoPath(f); p != t.Path && !slices.Contains(t.ExtraPaths, p) {
			t.ExtraPaths = append(t.ExtraPaths, p)
		}
	}
	return t, true
}

// webhookTargets lists the applications' sources if the controller
// implements WebhookTargets, and otherwise returns an error wrapping
// errors.ErrUnsupported: refreshing everything instead would break the
// promise that a push refreshes only what it touched.
func webhookTargets(c Controller) ([]WebhookTarget, error) {
	if w, ok := c.(WebhookTargets); ok {
		return w.WebhookTargets(), nil
	}
	return nil, unsupported("webhook routing", "WebhookTargets")
}

// WebhookResponse answers a verified push delivery.
type WebhookResponse struct {
	// Refreshed names the applications made due now, sorted.
	Refreshed []string `json:"refreshed"`
	// Ignored says why nothing was refreshed.
	Ignored string `json:"ignored,omitempty"`
}

// CodePayloadTooLarge is the code of a 413: a webhook body larger than
// WebhookOptions.MaxBody.
const CodePayloadTooLarge = "payload_too_large"

// CodeTooManyRequests is the code of a 429: a sender past its rate limit.
const CodeTooManyRequests = "too_many_requests"

// webhooks serves the webhook routes.
type webhooks struct {
	s     *server
	opts  WebhookOptions
	seen  *replayCache
	limit *ipLimiter // nil: no limit
}

func newWebhooks(s *server, opts WebhookOptions) *webhooks {
	opts = opts.withDefaults()
	if len(opts.Secrets.Enabled()) > 0 {
		if _, err := webhookTargets(s.ctl); err != nil {
			s.log.Warn("webhooks cannot be routed: every delivery will be answered with 501 and pushes wait for polling", "error", err)
		}
	}
	h := &webhooks{s: s, opts: opts, seen: newReplayCache(opts.ReplayCache, opts.ReplayWindow)}
	if opts.RatePerSecond > 0 {
		h.limit = newIPLimiter(rate.Limit(opts.RatePerSecond), opts.RateBurst, s.now)
	}
	return h
}

// serve handles one delivery and counts it by provider and outcome.
func (h *webhooks) serve(w http.ResponseWriter, r *http.Request) error {
	p := WebhookProvider(r.PathValue("provider"))
	if !slices.Contains(WebhookProviders(), p) {
		return errorf(http.StatusNotFound, CodeNotFound, "no webhook provider %q; the providers are github, gitlab, gitea, bitbucket and generic", p)
	}
	var resp WebhookResponse
	err := h.admit(r)
	if err == nil {
		resp, err = h.deliver(w, r, p)
	}
	if res, ok := webhookResult(resp, err); ok {
		h.s.opts.Metrics.WebhookDelivery(string(p), res)
	}
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if len(resp.Refreshed) == 0 {
		status = http.StatusOK
	}
	writeJSON(w, status, resp)
	return nil
}

// webhookResult names a delivery's outcome for the metrics. Server-side
// failures are not a delivery's fault and are not counted; they are logged
// as errors.
func webhookResult(resp WebhookResponse, err error) (metrics.WebhookResult, bool) {
	if err == nil {
		if len(resp.Refreshed) > 0 {
			return metrics.WebhookAccepted, true
		}
		return metrics.WebhookIgnored, true
	}
	switch classify(err).Status {
	case http.StatusBadRequest:
		return metrics.WebhookInvalid, true
	case http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return metrics.WebhookRejected, true
	}
	return "", false
}

func (h *webhooks) deliver(w http.ResponseWriter, r *http.Request, p WebhookProvider) (WebhookResponse, error) {
	secret := h.opts.Secrets[p]
	if secret == "" {
		value, file := WebhookSecretEnv(p)
		return WebhookResponse{}, errorf(http.StatusNotFound, CodeNotFound,
			"the %s webhook is disabled: the controller has no secret for it (%s, %s or %s)", p, file, value, EnvWebhookSecretFile)
	}
	pr := providerOf(p)
	if err := pr.present(r.Header); err != nil {
		return WebhookResponse{}, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: err.Error()}
	}
	if r.ContentLength > h.opts.MaxBody {
		return WebhookResponse{}, errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "webhook body exceeds %d bytes", h.opts.MaxBody)
	}
	body, err := readBody(w, r, h.opts.MaxBody)
	if err != nil {
		return WebhookResponse{}, err
	}
	if err := pr.verify(r.Header, body, secret); err != nil {
		return WebhookResponse{}, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: err.Error()}
	}
	if event, push := pr.event(r.Header); !push {
		return ignored("event %q is not a push", event), nil
	}
	ev, err := pr.parse(payloadOf(r, body))
	if err != nil {
		return WebhookResponse{}, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: fmt.Sprintf("%s push payload: %v", p, err)}
	}
	id := pr.deliveryID(r.Header)
	if id == "" {
		id = ev.id
	}
	release, fresh := h.seen.claim(h.s.now(), replayKeys(p, id, body)...)
	if !fresh {
		return WebhookResponse{}, errorf(http.StatusConflict, CodeConflict, "%s delivery %q was already received; a replay is not acted upon", p, id)
	}
	resp, err := h.route(p, id, ev)
	if err != nil {
		release() // let the forge's redelivery try again
	}
	return resp, err
}

// admit applies the per-source rate limit.
func (h *webhooks) admit(r *http.Request) error {
	if h.limit == nil {
		return nil
	}
	ok, wait := h.limit.allow(r)
	if ok {
		return nil
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	return &Error{Status: http.StatusTooManyRequests, Code: CodeTooManyRequests, retryAfter: secs,
		Message: fmt.Sprintf("too many webhook deliveries from %s; retry in %ds", sourceOf(r), secs)}
}

// readBody reads at most limit bytes, refusing a larger body with 413.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "webhook body exceeds %d bytes", limit)
	case err != nil:
		return nil, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "read webhook body", Err: err}
	}
	return body, nil
}

// replayKeys are the delivery id and the body digest, each per provider.
func replayKeys(p WebhookProvider, id string, body []byte) []string {
	sum := sha256.Sum256(body)
	keys := []string{string(p) + "\x00body\x00" + string(sum[:])}
	if id != "" {
		idSum := sha256.Sum256([]byte(id)) // bounds what an id may cost
		keys = append(keys, string(p)+"\x00id\x00"+string(idSum[:]))
	}
	return keys
}

func ignored(format string, args ...any) WebhookResponse {
	return WebhookResponse{Refreshed: []string{}, Ignored: fmt.Sprintf(format, args...)}
}

// route refreshes the applications ev touched.
func (h *webhooks) route(p WebhookProvider, id string, ev pushEvent) (WebhookResponse, error) {
	if len(ev.refs) == 0 {
		return ignored("the push only deleted refs"), nil
	}
	targets, err := webhookTargets(h.s.ctl)
	if err != nil {
		return WebhookResponse{}, err
	}
	apps, reason := ev.match(targets)
	if len(apps) == 0 {
		h.s.log.Info("webhook push refreshed nothing", "provider", p, "delivery", id, "reason", reason)
		return ignored("%s", reason), nil
	}
	resp := WebhookResponse{Refreshed: []string{}}
	var errs []error
	for _, app := range apps {
		err := h.s.ctl.Refresh(app)
		switch {
		case errors.Is(err, ErrNotFound):
			continue // removed since it was listed; nothing to refresh
		case err != nil:
			errs = append(errs, fmt.Errorf("refresh %q: %w", app, err))
			continue
		}
		resp.Refreshed = append(resp.Refreshed, app)
		h.s.log.Info("webhook push made the application due now", "app", app, "provider", p, "delivery", id)
	}
	if len(errs) > 0 {
		return WebhookResponse{}, fmt.Errorf("webhook %s delivery %q: %w", p, id, errors.Join(errs...))
	}
	if len(resp.Refreshed) == 0 {
		return ignored("the matching applications were removed"), nil
	}
	return resp, nil
}

// pushEvent is what routing needs from any provider's push payload.
type pushEvent struct {
	// id is a delivery id carried in the body (generic deliveries).
	id string
	// repos are every URL the payload gives for the repository.
	repos []string
	// refs are the full ref names the push moved; deleted refs are left
	// out, as there is nothing to fetch from them.
	refs []string
	// defaultBranch is the repository's default branch; empty when the
	// payload does not say, and then HEAD matches every branch.
	defaultBranch string
	// files are the paths the push changed. When complete is false the
	// list is missing or cut short, and every path counts as touched.
	files    []string
	complete bool
}

// match returns the targets ev touched, sorted, or why there are none.
func (ev pushEvent) match(targets []WebhookTarget) ([]string, string) {
	keys := map[string]bool{}
	for _, u := range ev.repos {
		if k, err := source.RepositoryKey(u); err == nil {
			keys[k] = true
		}
	}
	var apps []string
	var sameRepo, sameRef bool
	for _, t := range targets {
		k, err := source.RepositoryKey(t.RepoURL)
		if err != nil || !keys[k] {
			continue
		}
		sameRepo = true
		if !slices.ContainsFunc(ev.refs, func(ref string) bool { return revisionMatches(t.Revision, ref, ev.defaultBranch) }) {
			continue
		}
		sameRef = true
		if ev.touches(t) && !slices.Contains(apps, t.App) {
			apps = append(apps, t.App)
		}
	}
	slices.Sort(apps)
	switch {
	case len(apps) > 0:
		return apps, ""
	case !sameRepo:
		return nil, "no application tracks this repository"
	case !sameRef:
		return nil, fmt.Sprintf("no application on this repository tracks %s", strings.Join(ev.refs, ", "))
	}
	return nil, "the push touched no application's path"
}

// touches reports whether the push changed anything under t's paths.
func (ev pushEvent) touches(t WebhookTarget) bool {
	if !ev.complete {
		return true
	}
	roots := append([]string{cleanRepoPath(t.Path)}, t.ExtraPaths...)
	for _, f := range ev.files {
		f = cleanRepoPath(f)
		for _, root := range roots {
			if under(f, cleanRepoPath(root)) {
				return true
			}
		}
	}
	return false
}

// revisionMatches reports whether moving ref can change what revision
// resolves to, following how the fetcher resolves a revision: a full ref
// name, else a tag or branch of that name; HEAD follows the default branch.
func revisionMatches(revision, ref, defaultBranch string) bool {
	switch {
	case revision == "" || revision == application.DefaultRevision:
		branch, ok := strings.CutPrefix(ref, "refs/heads/")
		return ok && (defaultBranch == "" || branch == defaultBranch)
	case strings.HasPrefix(revision, "refs/"):
		return revision == ref
	case isCommitID(revision):
		return false
	}
	return ref == "refs/heads/"+revision || ref == "refs/tags/"+revision
}

// isCommitID reports whether s is a full SHA-1 or SHA-256 commit id.
func isCommitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
			return false
		}
	}
	return true
}

// cleanRepoPath makes a repository path comparable: slash-separated,
// relative, "." for the root.
func cleanRepoPath(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return p[1:]
}

// under reports whether the clean path p is root or inside it.
func under(p, root string) bool {
	return root == "." || p == root || strings.HasPrefix(p, root+"/")
}
