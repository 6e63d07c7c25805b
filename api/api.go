// Package api serves Flotilla's HTTP API: application status, explicit syncs,
// rollbacks and refreshes as JSON under /api/v1, the event stream as
// Server-Sent Events, health and readiness probes, and Prometheus metrics.
//
// Every write must declare a JSON body and carry RequestHeader, so that no
// browser page can forge one; webhooks authenticate by signature instead and
// are rate-limited per source before their body is read. NewServer sets the
// read, write and idle timeouts; event streams and waited syncs lift the
// write timeout for themselves, and Options.Stopping ends them for a
// graceful shutdown.
//
// Handlers return errors; one writer turns them into a JSON Error, sanitised
// and logged once. Every request passes through the same middleware (recover,
// access log, authentication), and the event stream flushes through all of
// it, which the tests check. Each route then asks package access whether the
// caller may do what it does, and every write is audited.
//
// Options.MCP adds a Model Context Protocol endpoint for agents. Its tools
// are served by the routes above, called in-process with the caller's
// identity, so an agent meets the same authorization, redaction and audit
// as the CLI does, and the endpoint has no decisions of its own to drift.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/metrics"
)

// Options configure the API handler.
type Options struct {
	// Controller answers for applications. Required.
	Controller Controller
	// Events feeds GET /api/v1/events; nil answers that route with 501.
	Events *events.Broker
	// Metrics is served on /metrics; nil serves 404 there.
	Metrics *metrics.Metrics
	// UI serves the web UI's files under /ui/, and / redirects there; nil
	// leaves both to the authenticated routes (401 without a token). The
	// files are served without a token since they carry no data: every
	// call the page makes goes to /api/v1 with the operator's token.
	UI http.Handler
	// ConfigProblem says why the newest applications file (or what its
	// application sets generate) was not loaded, "" when it was; the list
	// of applications carries it for global readers. Nil: never a problem.
	ConfigProblem func() string
	// Ready is called by /readyz with the request's context bounded by
	// ReadyTimeout; nil means always ready. A check that has not answered
	// by then is a 503, so a hung daemon cannot hang the probe.
	Ready func(ctx context.Context) error
	// Leadership, when set, says whether this controller leads or stands
	// by: /readyz reports it, and a standby refuses every write with 503
	// naming the leader. Nil: a controller without a leader lease.
	Leadership func() Leadership
	// ReadyTimeout bounds one /readyz check. Default 2s.
	ReadyTimeout time.Duration
	// Stopping, when closed, ends every event stream and answers every
	// waited sync or rollback at once with 503, so that a graceful
	// http.Server.Shutdown is not held up by requests that could last
	// minutes. Nil: never.
	Stopping <-chan struct{}
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger

	// Auth.
	//
	// Tokens are the accepted bearer tokens (see TokensFromEnv).
	Tokens Tokens
	// NoAuth serves every route without a token, all as admin. Only for a
	// loopback listener, which CheckListen enforces before serving; the
	// API then answers only requests for localhost or a loopback address
	// that come from no other origin (see loopbackOnly).
	NoAuth bool
	// PublicMetrics serves /metrics without a token.
	PublicMetrics bool
	// TokenFile holds the tokens of the tokens file, which reach
	// applications only through the role bindings of Policy. Nil: none.
	TokenFile *access.TokenFile
	// Policy decides every request (see package access). Nil: no projects,
	// so only the global tokens reach anything.
	Policy *access.Policy
	// SSO, when set, serves /auth/login, /auth/callback and /auth/logout
	// and accepts the session cookie they set wherever a token is accepted.
	SSO *SSO
	// Audit records every write; nil keeps an audit of
	// access.DefaultAuditSize entries logging to Logger.
	Audit *access.Audit

	// MCP configures the Model Context Protocol endpoint at MCPPath.
	// Default: not served.
	MCP MCPOptions

	// Webhooks configure POST /api/v1/webhooks/{provider}: the secrets
	// that enable each provider, the body limit and the replay cache.
	// Default: no secrets, every provider disabled.
	Webhooks WebhookOptions

	// Timing.
	//
	// Heartbeat is how often an idle event stream gets a comment line, so
	// proxies keep it open and clients notice a dead one. Default 15s.
	Heartbeat time.Duration
	// MaxWait caps ?timeout for a sync or rollback with ?wait=true.
	// Default 10m; the default wait without ?timeout is 5m, capped by it.
	MaxWait time.Duration
}

// Defaults for Options.
const (
	DefaultHeartbeat    = 15 * time.Second
	DefaultMaxWait      = 10 * time.Minute
	DefaultReadyTimeout = 2 * time.Second
	defaultWait         = 5 * time.Minute
	maxBodyBytes        = 1 << 20
)

type server struct {
	opts Options
	ctl  Controller
	log  *slog.Logger
	now  func() time.Time
}

// New returns the API as one handler, middleware included.
func New(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.Policy == nil {
		opts.Policy = access.NewPolicy(nil)
	}
	if opts.Audit == nil {
		opts.Audit = access.NewAudit(0, opts.Logger)
	}
	s := &server{opts: opts, ctl: opts.Controller, log: opts.Logger.With("component", "api"), now: time.Now}

	// Every route says what it does (see authorize): on one application
	// (app), on all of them with the answer filtered to what the caller may
	// read (filtered), or on the controller as a whole (global).
	mux := http.NewServeMux()
	handle := func(pattern string, a authz, h func(http.ResponseWriter, *http.Request) error) {
		mux.Handle(pattern, s.audited(pattern, s.handler(s.authorize(a, h))))
	}
	handle("GET /api/v1/applications", filtered, s.listApplications)
	handle("GET /api/v1/applications/{name}", app(access.Read), s.getApplication)
	handle("GET /api/v1/applications/{name}/history", app(access.Read), s.getHistory)
	handle("GET /api/v1/applications/{name}/diff", app(access.Read), s.getDiff)
	// Logs are what the tasks print, which may be more than a viewer of
	// the status should read, so they take an operator unless the
	// application's project lets its viewers read them.
	handle("GET /api/v1/applications/{name}/logs", app(access.ReadLogs), s.getLogs)
	handle("POST /api/v1/applications/{name}/sync", app(access.Operate), s.postSync)
	handle("POST /api/v1/applications/{name}/rollback", app(access.Operate), s.postRollback)
	handle("POST /api/v1/applications/{name}/refresh", app(access.Operate), s.postRefresh)
	handle("POST /api/v1/applications/{name}/rollout/{command}", app(access.Operate), s.postRollout)
	// A store's rotation: the handler checks the caller may operate an
	// application granted the store, and queues only those it may.
	handle("POST /api/v1/secretstores/{name}/rotated", filtered, s.postStoreRotated)
	handle("GET /api/v1/events", filtered, s.streamEvents)
	// The swarm list counts every application, so only a global role
	// reads it; a viewer does.
	handle("GET /api/v1/swarms", global(access.Read), s.listSwarms)
	handle("GET /api/v1/router/traefik", global(access.Read), s.getRouterConfig)
	handle("GET /api/v1/audit", global(access.Administer), s.getAudit)
	if opts.SSO != nil {
		handle("GET /auth/login", open, s.ssoLogin)
		handle("GET /auth/callback", open, s.ssoCallback)
		handle("POST /auth/logout", open, s.ssoLogout)
		handle("GET /auth/cli", open, s.cliLogin)
		handle("GET /auth/session", open, s.ssoSession)
	}
	handle("GET /healthz", open, s.healthz)
	handle("GET /readyz", open, s.readyz)
	// Metrics label series with every application's name, so a project
	// role is not enough to read them.
	metricsHandler := opts.Metrics.Handler()
	handle("GET /metrics", global(access.Read), func(w http.ResponseWriter, r *http.Request) error {
		metricsHandler.ServeHTTP(w, r)
		return nil
	})
	// Anything else under the API answers in the API's own error shape.
	handle("/api/", filtered, func(_ http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, CodeNotFound, "no route for %s %s; see /api/v1/applications", r.Method, r.URL.Path)
	})

	// Webhooks authenticate by their signature, not a bearer token, and the
	// UI's static files carry no data, so both are routed before
	// authentication; every other request goes through it, and every write
	// among them must look like it came from the CLI or the UI (guardWrites).
	root := http.NewServeMux()
	root.Handle("POST /api/v1/webhooks/{provider}", s.standbyRefusesWrites(s.handler(newWebhooks(s, opts.Webhooks).serve)))
	if opts.UI != nil {
		root.Handle("GET /ui/", http.StripPrefix("/ui", opts.UI))
		root.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	}
	routes := s.standbyRefusesWrites(mux)
	root.Handle("/", s.authenticate(s.guardWrites(routes)))
	// The MCP endpoint authenticates like every route, then serves each
	// tool call through the same routes; its own POSTs carry JSON-RPC, not
	// writes, so they are not audited themselves (the writes they make are).
	if opts.MCP.Enabled {
		root.Handle(MCPPath, s.authenticate(s.newMCPHandler(routes)))
	}

	var h http.Handler = root
	if opts.NoAuth {
		h = s.loopbackOnly(root)
	}
	return s.recover(s.accessLog(h))
}

// handler adapts an error-returning handler to http.Handler.
func (s *server) handler(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// recover turns a handler panic into a 500 instead of a dropped connection.
func (s *server) recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panicked, request answered with 500", "path", r.URL.Path, "error", v)
				writeJSON(w, http.StatusInternalServerError, errorf(http.StatusInternalServerError, CodeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// accessLog logs each request at debug level with its status and duration.
// Errors are logged by writeError, so this never repeats them above debug.
func (s *server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		s.log.Debug("request served", "method", r.Method, "path", r.URL.Path,
			"status", rec.status, "duration", s.now().Sub(start))
	})
}

// statusRecorder remembers the status a handler wrote. Unwrap lets
// http.ResponseController reach the real writer's Flush and deadlines
// through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
