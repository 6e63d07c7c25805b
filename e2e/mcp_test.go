package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/internal/gittest"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// mcpBearer adds a token to every request of an MCP client, as an agent's
// configuration does.
type mcpBearer struct{ token string }

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpAgent is one MCP client session against the controller's endpoint.
type mcpAgent struct {
	t  *testing.T
	cs *mcp.ClientSession
}

func connectMCP(t *testing.T, server, token string) (*mcpAgent, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   server + api.MCPPath,
		HTTPClient: &http.Client{Transport: mcpBearer{token}, Timeout: 3 * time.Minute},
	}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &mcpAgent{t: t, cs: cs}, nil
}

func (a *mcpAgent) tools() []string {
	a.t.Helper()
	res, err := a.cs.ListTools(a.t.Context(), nil)
	if err != nil {
		a.t.Fatalf("list tools: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// call returns a tool's text and whether the tool refused.
func (a *mcpAgent) call(name string, args map[string]any) (string, bool) {
	a.t.Helper()
	res, err := a.cs.CallTool(a.t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		a.t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// mustCall decodes a tool's JSON answer into v, failing on a refusal.
func (a *mcpAgent) mustCall(v any, name string, args map[string]any) string {
	a.t.Helper()
	text, isErr := a.call(name, args)
	if isErr {
		a.t.Fatalf("%s %v refused: %s", name, args, text)
	}
	if err := json.Unmarshal([]byte(text), v); err != nil {
		a.t.Fatalf("%s: %v\n%s", name, err, text)
	}
	return text
}

func TestAnAgentReadsAndOperatesApplicationsThroughTheMCPEndpointOfTheBinary(t *testing.T) {
	t.Parallel()
	stack := swarmtest.Name(t, "mcp")
	swarmtest.Cleanup(t, stack)
	repo := gittest.New(t)
	repo.Commit("initial", files(stackFile))

	const (
		adminToken    = "e2e-mcp-admin-token-0123456789"
		readToken     = "e2e-mcp-read-token-0123456789"
		operatorToken = "e2e-mcp-operator-token-0123456789"
	)
	dir := t.TempDir()
	tokensFile := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokensFile, []byte("tokens:\n  - {name: agent-operator, sha256: "+access.Digest(operatorToken)+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	appsFile := filepath.Join(dir, "applications.yaml")
	if err := os.WriteFile(appsFile, []byte(fmt.Sprintf(`apiVersion: flotilla/v1
projects:
  - name: agents
    applications: [%[1]s]
    roles:
      - {role: operator, tokens: [agent-operator]}
applications:
  - name: %[1]s
    source:
      repoURL: %[2]s
      revision: main
      path: deploy
      compose:
        envFiles: [.env]
    stack: %[1]s
    syncPolicy:
      automated: {}
      interval: 10m
`, stack, repo.Dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"FLOTILLA_ADMIN_TOKEN=" + adminToken, "FLOTILLA_READ_TOKEN=" + readToken}
	id := "e2emcp" + strings.TrimPrefix(stack, "mcp")
	start := func(flags ...string) (*stoppable, string) {
		addr := freeAddr(t)
		ctl := startController(t, appsFile, id, env, append([]string{"--listen", addr, "--tokens-file", tokensFile, "--ui=false"}, flags...)...)
		server := "http://" + addr
		waitReady(t, server, 90*time.Second)
		return ctl, server
	}
	readTools := slices.Sorted(slices.Values(api.MCPReadTools))
	allTools := slices.Sorted(slices.Values(append(slices.Clone(api.MCPReadTools), api.MCPWriteTools...)))

	// Read-only, as configured by default: not even the operator is
	// offered a write tool.
	ctl, server := start("--mcp")
	op, err := connectMCP(t, server, operatorToken)
	if err != nil {
		t.Fatalf("connect as the operator: %v", err)
	}
	if got := op.tools(); !slices.Equal(got, readTools) {
		t.Errorf("read-only endpoint lists %v, want %v", got, readTools)
	}
	if code, _ := ctl.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("controller exited %d", code)
	}

	// With writes allowed. The swarm holds the record, so the restarted
	// controller finds the application deployed.
	_, server = start("--mcp", "--mcp-allow-writes")
	if _, err := connectMCP(t, server, ""); err == nil {
		t.Error("an agent without a token connected")
	}
	if _, err := connectMCP(t, server, "not-a-token-0123456789"); err == nil {
		t.Error("an agent with a wrong token connected")
	}
	viewer, err := connectMCP(t, server, readToken)
	if err != nil {
		t.Fatalf("connect as the viewer: %v", err)
	}
	if op, err = connectMCP(t, server, operatorToken); err != nil {
		t.Fatalf("connect as the operator: %v", err)
	}
	if got := op.tools(); !slices.Equal(got, allTools) {
		t.Errorf("endpoint with writes lists %v to the operator, want %v", got, allTools)
	}

	var list api.ApplicationList
	out := viewer.mustCall(&list, api.ToolListApplications, nil)
	if len(list.Items) != 1 || list.Items[0].Name != stack || list.Items[0].Sync != "Synced" {
		t.Fatalf("list: %s", out)
	}
	var st struct {
		Name     string `json:"name"`
		Services []struct {
			Name string `json:"name"`
		} `json:"services"`
	}
	outputs := []string{out}
	outputs = append(outputs, viewer.mustCall(&st, api.ToolGetApplication, map[string]any{"name": stack}))
	if st.Name != stack || len(st.Services) != 3 {
		t.Errorf("get: %+v", st)
	}
	var hist api.HistoryList
	outputs = append(outputs, viewer.mustCall(&hist, api.ToolHistory, map[string]any{"name": stack}))
	if len(hist.Items) != 1 || hist.Items[0].Revision != 1 {
		t.Fatalf("history: %+v", hist.Items)
	}

	// A commit: the diff and the plan show it, and only an operator may
	// sync it.
	repo.Commit("worker queue", files(strings.Replace(stackFile, "QUEUE: jobs", "QUEUE: urgent", 1)))
	var diff api.Diff
	outputs = append(outputs, viewer.mustCall(&diff, api.ToolDiff, map[string]any{"name": stack}))
	if !strings.Contains(diff.Manifest, "urgent") || len(diff.Services) != 1 || diff.Services[0].Name != "worker" {
		t.Fatalf("diff: %+v", diff)
	}
	var plan api.Diff
	outputs = append(outputs, viewer.mustCall(&plan, api.ToolPlan, map[string]any{"name": stack}))
	if len(plan.Services) != 1 || plan.Services[0].Name != "worker" {
		t.Errorf("plan: %+v", plan)
	}
	for _, o := range outputs {
		if strings.Contains(o, "s3cr3t-token-value") {
			t.Errorf("a tool answer holds the secret's value: %s", o)
		}
	}

	text, refused := viewer.call(api.ToolSync, map[string]any{"name": stack})
	if !refused || !strings.Contains(text, "needs operator") {
		t.Fatalf("sync as the viewer: refused=%v %s", refused, text)
	}
	var res api.OperationResponse
	op.mustCall(&res, api.ToolSync, map[string]any{"name": stack, "wait": true, "timeout": "2m"})
	if res.Phase != api.Succeeded || res.Revision != 2 {
		t.Fatalf("sync as the operator: %+v", res)
	}
	viewer.mustCall(&hist, api.ToolHistory, map[string]any{"name": stack})
	if len(hist.Items) != 2 || hist.Items[0].Revision != 2 {
		t.Fatalf("history after the sync: %+v", hist.Items)
	}

	// Both attempts are in the audit, by who made them, marked as the
	// agent's.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, server+"/api/v1/audit", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var audit api.AuditList
	if err := json.NewDecoder(resp.Body).Decode(&audit); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range audit.Items {
		got = append(got, fmt.Sprintf("%s %s %s %s %d %s", e.Who, e.Role, e.Route, e.App, e.Status, e.Options["via"]))
	}
	want := []string{
		fmt.Sprintf("read viewer POST /api/v1/applications/{name}/sync %s 403 mcp", stack),
		fmt.Sprintf("agent-operator operator POST /api/v1/applications/{name}/sync %s 200 mcp", stack),
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
