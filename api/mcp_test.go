package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
)

// bearerTransport adds a token to every request of an MCP client, as an
// agent's configuration does.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// newMCPEnv is newAccessEnv with the MCP endpoint served; writes says
// whether it offers the write tools.
func newMCPEnv(t *testing.T, writes bool) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokensFile(t, path, "shop-viewer", "shop-operator", "shop-admin", "bill-operator")
	tf, err := access.OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *api.Options) {
		o.TokenFile = tf
		o.Policy = access.NewPolicy(testProjects)
		o.MCP = api.MCPOptions{Enabled: true, AllowWrites: writes, Version: "test"}
	})
	e.ctl.SetHistory("shop", []charts.Release{{Revision: 1}, {Revision: 2}})
	return e
}

// connect opens an MCP session to e as the holder of token.
func (e *env) connect(t *testing.T, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "api-test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: e.srv.URL + api.MCPPath,
		HTTPClient: &http.Client{Transport: bearerTransport{token}}, DisableStandaloneSSE: true, MaxRetries: -1}
	cs, err := c.Connect(t.Context(), tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (e *env) mustConnect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := e.connect(t, token)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// callTool calls a tool and returns its text and whether it is an error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func TestMCP_writeToolsAreListedOnlyWhenTheConfigurationAllowsThem(t *testing.T) {
	readOnly := newMCPEnv(t, false)
	if got, want := toolNames(t, readOnly.mustConnect(t, fileTokens["shop-operator"])), sorted(api.MCPReadTools); !slices.Equal(got, want) {
		t.Errorf("read-only endpoint lists %v, want %v", got, want)
	}
	// A write tool that is not listed cannot be called either.
	if _, isErr := callToolOrProtocolError(t, readOnly.mustConnect(t, adminToken), api.ToolSync, map[string]any{"name": "shop"}); !isErr {
		t.Error("sync was served by an endpoint that does not offer it")
	}
	if n := len(readOnly.ctl.Syncs()); n != 0 {
		t.Errorf("%d syncs requested through a read-only endpoint", n)
	}

	writes := newMCPEnv(t, true)
	want := sorted(append(slices.Clone(api.MCPReadTools), api.MCPWriteTools...))
	if got := toolNames(t, writes.mustConnect(t, fileTokens["shop-operator"])); !slices.Equal(got, want) {
		t.Errorf("endpoint with writes lists %v, want %v", got, want)
	}
}

// callToolOrProtocolError calls a tool that may not exist: an unknown tool
// is a protocol error, not a tool result.
func callToolOrProtocolError(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error(), true
	}
	b, _ := json.Marshal(res.Content)
	return string(b), res.IsError
}

func TestMCP_aCallerWithoutATokenIsRefused(t *testing.T) {
	e := newMCPEnv(t, true)
	for _, tok := range []string{"", "not-a-token-0123456789"} {
		if _, err := e.connect(t, tok); err == nil {
			t.Errorf("token %q: connected", tok)
		}
	}
	resp, _ := e.do(t, http.MethodPost, api.MCPPath, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST %s without a token: %d, want 401", api.MCPPath, resp.StatusCode)
	}
}

func TestMCP_readToolsAnswerWhatTheRoutesAnswerForTheCallersRole(t *testing.T) {
	e := newMCPEnv(t, false)
	e.ctl.SetDiff("shop", api.Diff{Revision: "bbbb", Services: []api.ServiceDiff{{Name: "web", Change: api.ServiceUpdate}}})
	e.ctl.SetRevisionDiff("shop", 1, api.AgainstDeployed, api.Diff{Manifest: "-image: app:2\n+image: app:1\n"})
	viewer := e.mustConnect(t, fileTokens["shop-viewer"])

	text, isErr := callTool(t, viewer, api.ToolListApplications, nil)
	if isErr {
		t.Fatalf("list: %s", text)
	}
	var list api.ApplicationList
	if err := json.Unmarshal([]byte(text), &list); err != nil {
		t.Fatalf("list: %v\n%s", err, text)
	}
	// The project's viewer sees its own application only.
	if len(list.Items) != 1 || list.Items[0].Name != "shop" {
		t.Errorf("list as shop-viewer: %+v", list.Items)
	}

	text, isErr = callTool(t, viewer, api.ToolGetApplication, map[string]any{"name": "shop"})
	var st application.Status
	if isErr || json.Unmarshal([]byte(text), &st) != nil || st.Name != "shop" || len(st.Services) != 2 {
		t.Errorf("get shop: %v %s", isErr, text)
	}
	text, isErr = callTool(t, viewer, api.ToolHistory, map[string]any{"name": "shop"})
	var hist api.HistoryList
	if isErr || json.Unmarshal([]byte(text), &hist) != nil || len(hist.Items) != 2 {
		t.Errorf("history of shop: %v %s", isErr, text)
	}
	text, isErr = callTool(t, viewer, api.ToolDiff, map[string]any{"name": "shop"})
	if isErr || !strings.Contains(text, `"web"`) {
		t.Errorf("diff of shop: %v %s", isErr, text)
	}
	text, isErr = callTool(t, viewer, api.ToolPlan, map[string]any{"name": "shop", "rollbackTo": 1})
	if isErr || !strings.Contains(text, "image: app:1") {
		t.Errorf("plan of a rollback of shop: %v %s", isErr, text)
	}

	// Another project's application does not exist for this caller, as on
	// the REST route.
	text, isErr = callTool(t, viewer, api.ToolGetApplication, map[string]any{"name": "billing"})
	if !isErr || !strings.Contains(text, `no application "billing"`) || !strings.Contains(text, "404") {
		t.Errorf("get billing as shop-viewer: %v %s", isErr, text)
	}
	// A name cannot climb to another route.
	text, isErr = callTool(t, viewer, api.ToolHistory, map[string]any{"name": "../../audit"})
	if !isErr {
		t.Errorf("history of ../../audit answered: %s", text)
	}
}

func TestMCP_writeToolsNeedTheOperatorRoleAndAreAudited(t *testing.T) {
	e := newMCPEnv(t, true)

	// The read token is a global viewer: refused, with the route's words.
	text, isErr := callTool(t, e.mustConnect(t, readToken), api.ToolSync, map[string]any{"name": "shop"})
	if !isErr || !strings.Contains(text, "needs operator") || !strings.Contains(text, "403") {
		t.Errorf("sync as the read token: %v %s", isErr, text)
	}
	text, isErr = callTool(t, e.mustConnect(t, fileTokens["shop-viewer"]), api.ToolRollback, map[string]any{"name": "shop", "revision": 1})
	if !isErr || !strings.Contains(text, "needs operator") {
		t.Errorf("rollback as shop-viewer: %v %s", isErr, text)
	}
	if n := len(e.ctl.Syncs()) + len(e.ctl.Rollbacks()); n != 0 {
		t.Fatalf("%d operations ran for viewers", n)
	}

	op := e.mustConnect(t, fileTokens["shop-operator"])
	text, isErr = callTool(t, op, api.ToolSync, map[string]any{"name": "shop", "prune": true, "wait": true, "timeout": "10s"})
	var res api.OperationResponse
	if isErr || json.Unmarshal([]byte(text), &res) != nil || res.Phase != api.Succeeded {
		t.Fatalf("sync as shop-operator: %v %s", isErr, text)
	}
	if s := e.ctl.Syncs(); len(s) != 1 || s[0].By != "shop-operator" || !s[0].Prune {
		t.Errorf("syncs: %+v", s)
	}
	if text, isErr = callTool(t, op, api.ToolRefresh, map[string]any{"name": "shop"}); isErr {
		t.Errorf("refresh as shop-operator: %s", text)
	}
	// An operator of one project is nobody on another's application.
	text, isErr = callTool(t, op, api.ToolSync, map[string]any{"name": "billing"})
	if !isErr || !strings.Contains(text, `no application "billing"`) {
		t.Errorf("sync billing as shop-operator: %v %s", isErr, text)
	}

	_, b := e.do(t, http.MethodGet, "/api/v1/audit", adminToken, "")
	var got []string
	for _, it := range decode[api.AuditList](t, b).Items {
		if it.Options["via"] != "mcp" {
			t.Errorf("audit entry without via=mcp: %+v", it)
		}
		got = append(got, it.Who+" "+it.Route+" "+it.App+" "+http.StatusText(it.Status))
	}
	want := []string{
		"read POST /api/v1/applications/{name}/sync shop Forbidden",
		"shop-viewer POST /api/v1/applications/{name}/rollback shop Forbidden",
		"shop-operator POST /api/v1/applications/{name}/sync shop OK",
		"shop-operator POST /api/v1/applications/{name}/refresh shop Accepted",
		"shop-operator POST /api/v1/applications/{name}/sync billing Not Found",
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMCP_theEndpointIsBoundLikeTheRestOfTheAPI(t *testing.T) {
	off := newEnv(t, nil)
	resp, _ := off.do(t, http.MethodPost, api.MCPPath, adminToken, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST %s with MCP off: %d, want 404", api.MCPPath, resp.StatusCode)
	}

	e := newMCPEnv(t, true)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sync","arguments":{"name":"shop","revision":"` +
		strings.Repeat("a", 2<<20) + `"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+api.MCPPath, strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err = e.srv.Client().Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB body: %d, want 413", resp.StatusCode)
	}
	if n := len(e.ctl.Syncs()); n != 0 {
		t.Errorf("%d syncs from an oversized body", n)
	}

	// A standby refuses the write tools as it refuses the routes.
	standby := newEnv(t, func(o *api.Options) {
		o.MCP = api.MCPOptions{Enabled: true, AllowWrites: true}
		o.Leadership = func() api.Leadership { return api.Leadership{ID: "b", Holder: "a", Epoch: 3} }
	})
	text, isErr := callTool(t, standby.mustConnect(t, adminToken), api.ToolSync, map[string]any{"name": "shop"})
	if !isErr || !strings.Contains(text, `controller "a" leads`) {
		t.Errorf("sync on a standby: %v %s", isErr, text)
	}
}

func TestMCP_theTransportRefusesWhatItDoesNotServe(t *testing.T) {
	e := newMCPEnv(t, false)
	send := func(method string, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+api.MCPPath,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Stateless: no standalone stream, no session to end.
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if code, body := send(m, nil); code != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d %s, want 405", m, code, body)
		}
	}
	// A page of another origin cannot drive it, whatever it holds.
	if code, body := send(http.MethodPost, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("cross-origin POST: %d %s, want 403", code, body)
	}
	// An unlisted tool is unknown, not forbidden: the agent was never
	// offered it.
	text, isErr := callToolOrProtocolError(t, e.mustConnect(t, adminToken), api.ToolSync, map[string]any{"name": "shop"})
	if !isErr || !strings.Contains(text, "unknown tool") {
		t.Errorf("sync on a read-only endpoint: %v %s", isErr, text)
	}
}

// A waited sync outlasts the server's write timeout, as it does over REST:
// the tool lifts the deadline of the MCP request that carries it.
func TestMCP_aWaitedSyncOutlastsTheWriteTimeout(t *testing.T) {
	ctl := apitest.NewController(apitest.Sample()...)
	ctl.Hold = make(chan struct{})
	h := api.New(api.Options{Controller: ctl, Logger: slog.New(slog.DiscardHandler),
		Tokens: api.Tokens{{Name: "admin", Role: access.Admin, Secret: adminToken}},
		MCP:    api.MCPOptions{Enabled: true, AllowWrites: true}})
	addr := startServer(t, h, api.Timeouts{Read: time.Second, Write: 300 * time.Millisecond, Idle: time.Second})
	e := &env{srv: &httptest.Server{URL: "http://" + addr}}
	cs := e.mustConnect(t, adminToken)

	released := time.AfterFunc(time.Second, func() { close(ctl.Hold) })
	defer released.Stop()
	text, isErr := callTool(t, cs, api.ToolSync, map[string]any{"name": "shop", "wait": true, "timeout": "10s"})
	var res api.OperationResponse
	if isErr || json.Unmarshal([]byte(text), &res) != nil || res.Phase != api.Succeeded {
		t.Fatalf("waited sync past the write timeout: %v %s", isErr, text)
	}
}
