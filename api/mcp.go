package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPPath is where the Model Context Protocol endpoint is served when
// MCPOptions.Enabled is set.
const MCPPath = "/api/v1/mcp"

// MCPOptions configure the Model Context Protocol endpoint, which lets an
// agent read applications (and, when allowed, sync, refresh and roll them
// back) through tools that are the API's own routes.
type MCPOptions struct {
	// Enabled serves the endpoint at MCPPath. Default false: no endpoint.
	Enabled bool
	// AllowWrites also lists the sync, refresh and rollback tools. They
	// still need the operator role on the application, like the routes
	// they stand for. Default false: the write tools are not listed, so an
	// agent cannot even ask for one.
	AllowWrites bool
	// Version is the server version the endpoint reports to clients.
	Version string
}

// mcpEndpoint serves MCP over the streamable HTTP transport. It is
// stateless: every POST is authenticated on its own by the API's
// middleware and gets a server built for that request, so no session can
// outlive a revoked token or carry one caller's identity to another.
type mcpEndpoint struct {
	s *server
	// api is the authorized, audited API every tool call is served by.
	api     http.Handler
	opts    MCPOptions
	schemas *mcp.SchemaCache
}

// mcpCallKey carries what a tool call needs of the HTTP request that
// brought it: who sent it and how to lift its write deadline.
type mcpCallKey struct{}

type mcpCall struct {
	outer *http.Request
	w     http.ResponseWriter
}

// viaKey marks a request made on behalf of a tool call; the audit entry
// says so.
type viaKey struct{}

func viaFrom(ctx context.Context) string {
	v, _ := ctx.Value(viaKey{}).(string)
	return v
}

// newMCPHandler returns the endpoint's handler, to be served behind
// authentication. inner is the API's route table with authorization and
// audit on every route.
func (s *server) newMCPHandler(inner http.Handler) http.Handler {
	e := &mcpEndpoint{s: s, api: inner, opts: s.opts.MCP, schemas: mcp.NewSchemaCache()}
	h := mcp.NewStreamableHTTPHandler(e.server, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       s.log.With("component", "mcp"),
		// The same bound as every other body the API reads.
		MaxRequestBodyBytes: maxBodyBytes,
		// The SDK's own check refuses a loopback connection for another
		// Host, which would refuse a reverse proxy on the same machine.
		// loopbackOnly already makes that check, more strictly, for the
		// one API that answers without a token; with tokens, a page that
		// rebinds a name to the controller has no token to send.
		DisableLocalhostProtection: true,
	})
	// A browser page must not drive the endpoint with an operator's
	// session cookie: cross-origin writes are refused, as guardWrites
	// refuses them on the REST routes.
	protected := http.NewCrossOriginProtection().Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), mcpCallKey{}, &mcpCall{outer: r, w: w})
		protected.ServeHTTP(w, r.WithContext(ctx))
	})
}

// server builds the MCP server of one HTTP request. The tools read the
// caller from the request, and the write tools exist only when the
// configuration allows them.
func (e *mcpEndpoint) server(r *http.Request) *mcp.Server {
	call, ok := r.Context().Value(mcpCallKey{}).(*mcpCall)
	if !ok {
		return nil // answered 400 by the SDK; cannot happen behind newMCPHandler
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "flotilla", Title: "Flotilla", Version: e.opts.Version},
		&mcp.ServerOptions{
			Instructions: mcpInstructions,
			SchemaCache:  e.schemas,
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		})
	e.addReadTools(srv, call)
	if e.opts.AllowWrites {
		e.addWriteTools(srv, call)
	}
	return srv
}

const mcpInstructions = `Flotilla deploys applications from git to Docker Swarm. ` +
	`list_applications shows every application you may read with its sync and health status; ` +
	`get_application, diff, history and plan read one. ` +
	`When the controller allows writes, sync, refresh and rollback act on one application and need the operator role on it.`

// errToolRefused is wrapped by the error of every tool call the API
// refused, so a caller can tell a refusal from a transport failure.
var errToolRefused = errors.New("refused")

// toolError is the API's answer to a refused tool call, in words an agent
// can act on: the API's own message, then its status and code.
type toolError struct {
	Status  int
	Code    string
	Message string
}

func (e *toolError) Error() string {
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.Status, e.Code)
}

func (e *toolError) Unwrap() error { return errToolRefused }

// serve answers one tool call with the API route it stands for. The call
// goes through the same route table as a REST request, so authorization,
// the handler, redaction of what the caller may not read, audit and the
// standby's refusal of writes are the ones REST has; the endpoint adds
// nothing to them and leaves nothing out.
func (e *mcpEndpoint) serve(ctx context.Context, call *mcpCall, method, path string, q url.Values, body any) (json.RawMessage, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	u := url.URL{Path: path, RawQuery: q.Encode()}
	p, _ := principalFrom(call.outer.Context())
	ctx = context.WithValue(withPrincipal(ctx, p), viaKey{}, "mcp")
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	req.Host, req.RemoteAddr = call.outer.Host, call.outer.RemoteAddr
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &toolRecorder{header: http.Header{}, outer: call.w}
	e.api.ServeHTTP(rec, req)
	e.s.log.Debug("mcp tool call served", "method", method, "path", path, "status", rec.status, "by", p.Name)
	if rec.status < 200 || rec.status > 299 {
		var ae Error
		if err := json.Unmarshal(rec.body.Bytes(), &ae); err != nil || ae.Message == "" {
			return nil, &toolError{Status: rec.status, Code: CodeInternal, Message: http.StatusText(rec.status)}
		}
		return nil, &toolError{Status: ae.Status, Code: ae.Code, Message: ae.Message}
	}
	return json.RawMessage(bytes.TrimSpace(rec.body.Bytes())), nil
}

// toolRecorder keeps the answer of one API route for the tool result. A
// waited sync lifts the write deadline of the MCP request itself, since
// that is the connection the answer will travel on.
type toolRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	outer  http.ResponseWriter
}

func (r *toolRecorder) Header() http.Header { return r.header }

func (r *toolRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *toolRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// SetWriteDeadline is found by http.ResponseController, which
// liftWriteDeadline uses.
func (r *toolRecorder) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(r.outer).SetWriteDeadline(t)
}
