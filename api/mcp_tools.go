package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools of the MCP endpoint. Each one is a route of the API: its
// arguments become the route's path, query and body, and its result is
// the route's JSON answer, unchanged. Names are what an agent sees.
const (
	ToolListApplications = "list_applications"
	ToolGetApplication   = "get_application"
	ToolDiff             = "diff"
	ToolHistory          = "history"
	ToolPlan             = "plan"
	ToolSync             = "sync"
	ToolRefresh          = "refresh"
	ToolRollback         = "rollback"
)

// MCPReadTools and MCPWriteTools name the tools the endpoint lists: the
// read tools always, the write tools only with MCPOptions.AllowWrites.
var (
	MCPReadTools  = []string{ToolListApplications, ToolGetApplication, ToolDiff, ToolHistory, ToolPlan}
	MCPWriteTools = []string{ToolSync, ToolRefresh, ToolRollback}
)

type noInput struct{}

type appInput struct {
	Name string `json:"name" jsonschema:"the application's name, as list_applications shows it"`
}

type diffInput struct {
	Name     string `json:"name" jsonschema:"the application's name"`
	Revision int    `json:"revision,omitempty" jsonschema:"compare this recorded release revision (history lists them) instead of what runs"`
	Against  string `json:"against,omitempty" jsonschema:"with revision: declared (default; the revision against what git declares now) or deployed (against the newest release: what a rollback to it would change)"`
}

type planInput struct {
	Name       string `json:"name" jsonschema:"the application's name"`
	RollbackTo int    `json:"rollbackTo,omitempty" jsonschema:"plan a rollback to this release revision instead of a sync"`
}

type syncInput struct {
	Name     string `json:"name" jsonschema:"the application's name"`
	Prune    bool   `json:"prune,omitempty" jsonschema:"also remove what the repository stopped declaring"`
	DryRun   bool   `json:"dryRun,omitempty" jsonschema:"plan and report without writing"`
	Revision string `json:"revision,omitempty" jsonschema:"pin the sync to this commit instead of the tracked branch"`
	Wait     bool   `json:"wait,omitempty" jsonschema:"answer with the pass's result instead of at once"`
	Timeout  string `json:"timeout,omitempty" jsonschema:"with wait: how long to wait, such as 90s or 5m (default 5m, capped by the controller)"`
}

type rollbackInput struct {
	Name     string `json:"name" jsonschema:"the application's name"`
	Revision int    `json:"revision" jsonschema:"the release revision to redeploy, as history lists it"`
	Wait     bool   `json:"wait,omitempty" jsonschema:"answer with the pass's result instead of at once"`
	Timeout  string `json:"timeout,omitempty" jsonschema:"with wait: how long to wait, such as 90s or 5m"`
}

// appPath is the route of one application, escaped so that a name cannot
// reach another route.
func appPath(name, sub string) string {
	p := "/api/v1/applications/" + url.PathEscape(name)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// waitQuery is the ?wait=&timeout= of a sync or rollback.
func waitQuery(wait bool, timeout string) url.Values {
	q := url.Values{}
	if wait {
		q.Set("wait", "true")
		if timeout != "" {
			q.Set("timeout", timeout)
		}
	}
	return q
}

// result turns a route's answer into a tool result: the JSON as text and
// as structured content, both exactly what the route sent.
func result(body json.RawMessage, err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, err
	}
	return nil, body, nil
}

func readOnly(title string) *mcp.ToolAnnotations {
	f := false
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &f}
}

func writes(title string, destructive, idempotent bool) *mcp.ToolAnnotations {
	f := false
	return &mcp.ToolAnnotations{Title: title, DestructiveHint: &destructive, IdempotentHint: idempotent, OpenWorldHint: &f}
}

// addReadTools adds the tools that only read; a viewer may call them on
// the applications it may read.
func (e *mcpEndpoint) addReadTools(srv *mcp.Server, call *mcpCall) {
	mcp.AddTool(srv, &mcp.Tool{Name: ToolListApplications, Annotations: readOnly("List applications"),
		Description: "Lists the applications the caller may read, each with its sync and health status, revision and service counts (GET /api/v1/applications)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
			return result(e.serve(ctx, call, http.MethodGet, "/api/v1/applications", nil, nil))
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolGetApplication, Annotations: readOnly("Get an application"),
		Description: "Returns one application's full status: sync, health, revisions, per-service state, drift and the last error (GET /api/v1/applications/{name})."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in appInput) (*mcp.CallToolResult, any, error) {
			return result(e.serve(ctx, call, http.MethodGet, appPath(in.Name, ""), nil, nil))
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolDiff, Annotations: readOnly("Diff an application"),
		Description: "Shows how what the repository declares differs from what runs, service by service and field by field, with a manifest diff; with revision, compares a recorded release instead (GET /api/v1/applications/{name}/diff)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in diffInput) (*mcp.CallToolResult, any, error) {
			q := url.Values{}
			if in.Revision != 0 {
				q.Set("revision", strconv.Itoa(in.Revision))
			}
			if in.Against != "" {
				q.Set("against", in.Against)
			}
			return result(e.serve(ctx, call, http.MethodGet, appPath(in.Name, "diff"), q, nil))
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolHistory, Annotations: readOnly("Release history"),
		Description: "Lists an application's recorded release revisions, newest first: revision number, commit, when and by whom (GET /api/v1/applications/{name}/history)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in appInput) (*mcp.CallToolResult, any, error) {
			return result(e.serve(ctx, call, http.MethodGet, appPath(in.Name, "history"), nil, nil))
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolPlan, Annotations: readOnly("Plan a sync or rollback"),
		Description: "Says what a sync would change now (the services it would create, update or remove), or with rollbackTo what a rollback to that revision would change, writing nothing. Read-only: it needs the viewer role, unlike a dry-run sync."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in planInput) (*mcp.CallToolResult, any, error) {
			q := url.Values{}
			if in.RollbackTo != 0 {
				q.Set("revision", strconv.Itoa(in.RollbackTo))
				q.Set("against", AgainstDeployed)
			}
			return result(e.serve(ctx, call, http.MethodGet, appPath(in.Name, "diff"), q, nil))
		})
}

// addWriteTools adds the tools that change what runs. Listing them is the
// configuration's choice; calling one still needs the operator role on the
// application, decided by the route as for REST.
func (e *mcpEndpoint) addWriteTools(srv *mcp.Server, call *mcpCall) {
	mcp.AddTool(srv, &mcp.Tool{Name: ToolSync, Annotations: writes("Sync an application", true, true),
		Description: "Deploys what the repository declares (POST /api/v1/applications/{name}/sync). Needs the operator role. Without wait it answers Queued at once; get_application then shows the outcome."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in syncInput) (*mcp.CallToolResult, any, error) {
			body := SyncBody{Prune: in.Prune, DryRun: in.DryRun, Revision: in.Revision}
			return result(e.serve(ctx, call, http.MethodPost, appPath(in.Name, "sync"), waitQuery(in.Wait, in.Timeout), body))
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolRefresh, Annotations: writes("Refresh an application", false, true),
		Description: "Makes the application due now: it fetches and plans at once, and applies only if it is automated (POST /api/v1/applications/{name}/refresh). Needs the operator role."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in appInput) (*mcp.CallToolResult, any, error) {
			return result(e.serve(ctx, call, http.MethodPost, appPath(in.Name, "refresh"), nil, struct{}{}))
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolRollback, Annotations: writes("Roll back an application", true, false),
		Description: "Redeploys a recorded release revision; an automated application stays on it until a new commit arrives (POST /api/v1/applications/{name}/rollback). Needs the operator role; plan with rollbackTo shows what it would change."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in rollbackInput) (*mcp.CallToolResult, any, error) {
			body := RollbackBody{Revision: in.Revision}
			return result(e.serve(ctx, call, http.MethodPost, appPath(in.Name, "rollback"), waitQuery(in.Wait, in.Timeout), body))
		})
}
