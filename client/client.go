// Package client is a Go client for Flotilla's HTTP API. The CLI is built on
// it; scripts in Go can use it the same way. Every method returns the API's
// own types, and every error says what the server said and what to try next.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
)

// Client talks to one controller.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
	// unauthorizedHint replaces the advice given with a 401.
	unauthorizedHint string
}

// New returns a client for the controller at server (such as
// http://127.0.0.1:8080), authenticating with token when it is not empty.
// A nil httpClient uses one without an overall timeout, since the event
// stream and waiting syncs are long requests; bound calls with their context.
func New(server, token string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q is not an http:// or https:// URL", server)
	}
	if u.User != nil {
		return nil, errors.New("server URL must not carry credentials; set FLOTILLA_TOKEN or FLOTILLA_TOKEN_FILE")
	}
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	return &Client{base: u, token: token, hc: httpClient}, nil
}

// SetUnauthorizedHint sets the advice a 401 answer carries in place of the
// default (set a token), for a client whose token came from elsewhere, such
// as a stored login.
func (c *Client) SetUnauthorizedHint(hint string) { c.unauthorizedHint = hint }

// Server returns the controller's base URL.
func (c *Client) Server() string { return c.base.String() }

// Error is an answer of the API other than success.
type Error struct {
	StatusCode int
	// Code and Message are the server's (api.Error).
	Code    string
	Message string
	// Hint says what to do next, when there is something to say.
	Hint string
}

func (e *Error) Error() string {
	s := e.Message
	if s == "" {
		s = http.StatusText(e.StatusCode)
	}
	s = fmt.Sprintf("server answered %d: %s", e.StatusCode, s)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// hint chooses the advice for a status.
func hint(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "set FLOTILLA_TOKEN or FLOTILLA_TOKEN_FILE to a token the controller accepts"
	case http.StatusForbidden:
		return "the credential in use has no role that allows this"
	case http.StatusNotImplemented:
		return "this controller or its backend does not offer it"
	case http.StatusServiceUnavailable:
		return "the controller is not ready yet; try again shortly"
	case http.StatusConflict:
		return "try again when the current pass finishes"
	}
	return ""
}

// IsStatus reports whether err is an API answer with the given HTTP status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == status
}

// Applications lists every application.
func (c *Client) Applications(ctx context.Context) (api.ApplicationList, error) {
	var out api.ApplicationList
	return out, c.do(ctx, http.MethodGet, appPath(), nil, nil, &out)
}

// Swarms checks and lists the swarms the controller deploys to.
func (c *Client) Swarms(ctx context.Context) (api.SwarmList, error) {
	var out api.SwarmList
	return out, c.do(ctx, http.MethodGet, "/api/v1/swarms", nil, nil, &out)
}

// Application returns one application's full status.
func (c *Client) Application(ctx context.Context, name string) (application.Status, error) {
	var out application.Status
	return out, c.do(ctx, http.MethodGet, appPath(name), nil, nil, &out)
}

// History lists an application's recorded revisions, newest first.
func (c *Client) History(ctx context.Context, name string) (api.HistoryList, error) {
	var out api.HistoryList
	return out, c.do(ctx, http.MethodGet, appPath(name, "history"), nil, nil, &out)
}

// Diff compares what the repository declares with what runs.
func (c *Client) Diff(ctx context.Context, name string) (api.Diff, error) {
	var out api.Diff
	return out, c.do(ctx, http.MethodGet, appPath(name, "diff"), nil, nil, &out)
}

// DiffRevision compares recorded revision n with what the repository
// declares now (against api.AgainstDeclared, also when against is empty) or
// with the newest record (api.AgainstDeployed: what a rollback to it would
// change).
func (c *Client) DiffRevision(ctx context.Context, name string, n int, against string) (api.Diff, error) {
	q := url.Values{"revision": {strconv.Itoa(n)}}
	if against != "" {
		q.Set("against", against)
	}
	var out api.Diff
	return out, c.do(ctx, http.MethodGet, appPath(name, "diff"), q, nil, &out)
}

// Wait says whether a sync or rollback call waits for the pass, and how
// long the server should wait before answering Running.
type Wait struct {
	Wait    bool
	Timeout time.Duration
}

func (w Wait) query() url.Values {
	q := url.Values{}
	if w.Wait {
		q.Set("wait", "true")
		if w.Timeout > 0 {
			q.Set("timeout", w.Timeout.String())
		}
	}
	return q
}

// Sync asks for an explicit sync. With w.Wait the answer is the pass's
// result (Phase Succeeded or Failed) or Phase Running if it outlasted the
// timeout; without it, Phase Queued.
func (c *Client) Sync(ctx context.Context, name string, body api.SyncBody, w Wait) (api.OperationResponse, error) {
	var out api.OperationResponse
	return out, c.do(ctx, http.MethodPost, appPath(name, "sync"), w.query(), body, &out)
}

// Rollback redeploys a recorded revision, as Sync does.
func (c *Client) Rollback(ctx context.Context, name string, revision int, w Wait) (api.OperationResponse, error) {
	var out api.OperationResponse
	return out, c.do(ctx, http.MethodPost, appPath(name, "rollback"), w.query(), api.RollbackBody{Revision: revision}, &out)
}

// RolloutCommand queues an operator's command (one of api.RolloutCommands)
// for the rollout of the application's service; an empty service means
// the application's only rollout. The next pass takes it.
func (c *Client) RolloutCommand(ctx context.Context, name, command, service string) (api.OperationResponse, error) {
	var out api.OperationResponse
	return out, c.do(ctx, http.MethodPost, appPath(name, "rollout", command), nil, api.RolloutBody{Service: service}, &out)
}

// Refresh makes the application fetch and plan now.
func (c *Client) Refresh(ctx context.Context, name string) (api.OperationResponse, error) {
	var out api.OperationResponse
	return out, c.do(ctx, http.MethodPost, appPath(name, "refresh"), nil, nil, &out)
}

// StoreRotated tells the controller that a secret store rotated a value
// (only the entry at path, when path is not ""): the store's values are
// read again and the applications that use them, among those the caller
// may operate, are due now.
func (c *Client) StoreRotated(ctx context.Context, store, path string) (api.StoreRotatedResponse, error) {
	var out api.StoreRotatedResponse
	return out, c.do(ctx, http.MethodPost, "/api/v1/secretstores/"+url.PathEscape(store)+"/rotated", nil, api.StoreRotatedRequest{Path: path}, &out)
}

// Ready returns nil when the controller answers /readyz with 200.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
}

// Readiness is Ready with the controller's answer: for one run with a
// leader lease, whether it leads or stands by, and the epoch.
func (c *Client) Readiness(ctx context.Context) (api.Readiness, error) {
	var rd api.Readiness
	err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, &rd)
	return rd, err
}

func appPath(parts ...string) string {
	p := "/api/v1/applications"
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// newRequest builds an authenticated request for path.
func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if method != http.MethodGet && method != http.MethodHead {
		// The API refuses a write without both, so that a browser page
		// cannot forge one; an empty body is still declared JSON.
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.RequestHeader, "1")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "flotilla-client")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// send performs req and turns transport failures and non-2xx answers into
// errors that say what to do.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ctxErr)
		}
		return nil, fmt.Errorf("cannot reach the controller at %s (is it running? set --server or FLOTILLA_SERVER): %w", c.base, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	e := &Error{StatusCode: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var ae api.Error
	if json.Unmarshal(b, &ae) == nil && ae.Message != "" {
		e.Code, e.Message = ae.Code, ae.Message
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	// A refusal (403) or an unavailable answer (503) that the API itself
	// explained needs no guess: its message says what the caller lacks, or
	// why the controller withholds the answer (stopping, standby, logs whose
	// secrets cannot be blanked). The guesses are for bare answers, e.g. of
	// a proxy in front of the controller.
	explained := e.Code != "" && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusServiceUnavailable)
	if e.Code != api.CodeRequestHeaderMissing && e.Code != api.CodeUnsupportedMediaType && !explained {
		e.Hint = hint(resp.StatusCode)
		if resp.StatusCode == http.StatusUnauthorized && c.unauthorizedHint != "" {
			e.Hint = c.unauthorizedHint
		}
	}
	return nil, e
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	req, err := c.newRequest(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// parseRetry reads an SSE retry field in milliseconds.
func parseRetry(v string) (time.Duration, bool) {
	ms, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || ms < 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
