package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
)

// Tokens of the tokens file in these tests, by name.
var fileTokens = map[string]string{
	"shop-viewer":   "tok-shop-viewer-0123456789",
	"shop-operator": "tok-shop-operator-0123456789",
	"shop-admin":    "tok-shop-admin-0123456789",
	"bill-operator": "tok-bill-operator-0123456789",
}

// The projects: "shop" holds the sample application shop, "bank" holds
// billing.
var testProjects = []application.Project{
	{Name: "shop", Applications: []string{"shop"}, Roles: []application.RoleBinding{
		{Role: "viewer", Tokens: []string{"shop-viewer"}},
		{Role: "operator", Tokens: []string{"shop-operator"}},
		{Role: "admin", Tokens: []string{"shop-admin"}},
	}},
	{Name: "bank", Applications: []string{"bill*"}, Roles: []application.RoleBinding{
		{Role: "operator", Tokens: []string{"bill-operator"}},
	}},
}

func writeTokensFile(t *testing.T, path string, names ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("tokens:\n")
	for _, n := range names {
		b.WriteString("  - {name: " + n + ", sha256: " + access.Digest(fileTokens[n]) + "}\n")
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// newAccessEnv is the API with the global tokens, a tokens file holding
// every token of fileTokens, and testProjects.
func newAccessEnv(t *testing.T) (*env, string) {
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
	})
	for _, app := range []string{"shop", "billing"} {
		e.ctl.SetHistory(app, []charts.Release{{Revision: 1}})
	}
	return e, path
}

// caller is one row of the role matrix: a token and what it may do on the
// shop application (its own, for project tokens) and on billing (another
// project's), as HTTP statuses of a read and of an operation.
type caller struct {
	name                 string
	token                string
	ownRead, ownOperate  int
	othRead, othOperate  int
	audit, metrics, list int
	sees                 []string // the application list
}

var callers = []caller{
	{"global admin", adminToken, 200, 202, 200, 202, 200, 200, 200, []string{"billing", "shop"}},
	{"global read", readToken, 200, 403, 200, 403, 403, 200, 200, []string{"billing", "shop"}},
	{"project viewer", fileTokens["shop-viewer"], 200, 403, 404, 404, 403, 403, 200, []string{"shop"}},
	{"project operator", fileTokens["shop-operator"], 200, 202, 404, 404, 403, 403, 200, []string{"shop"}},
	{"project admin", fileTokens["shop-admin"], 200, 202, 404, 404, 403, 403, 200, []string{"shop"}},
	{"no token", "", 401, 401, 401, 401, 401, 401, 401, nil},
	{"unknown token", "tok-nobody-0123456789", 401, 401, 401, 401, 401, 401, 401, nil},
}

// appRoutes are every route on one application; operate says it needs the
// operator role, otherwise a viewer may use it; ok, when set, is the status
// of an allowed call in place of the caller table's.
var appRoutes = []struct {
	method, path, body string
	operate            bool
	ok                 int
}{
	{"GET", "", "", false, 0},
	{"GET", "/history", "", false, 0},
	{"GET", "/diff", "", false, 0},
	{"GET", "/logs?tail=5", "", true, 200},
	{"POST", "/sync", `{"prune":true}`, true, 0},
	{"POST", "/refresh", "", true, 0},
	{"POST", "/rollback", `{"revision":1}`, true, 0},
}

func TestAPI_roleMatrix(t *testing.T) {
	e, _ := newAccessEnv(t)
	_, missing := e.do(t, "GET", "/api/v1/applications/nope", adminToken, "")
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			call := func(method, path, body string) (int, []byte) {
				resp, b := e.do(t, method, path, c.token, body)
				return resp.StatusCode, b
			}
			checkAppRoutes(t, c, missing, call)
			checkGlobalRoutes(t, c, []globalRoute{{"/api/v1/audit", c.audit}, {"/metrics", c.metrics}, {"/api/v1/applications", c.list}}, call)
			if got := streamStatus(t, e, c.token); got != c.list {
				t.Errorf("GET /api/v1/events: %d, want %d", got, c.list)
			}
		})
	}
}

// checkAppRoutes sends every route of appRoutes for shop (the caller's own
// project) and billing (another's) through call, and checks each answer
// against the caller's row. A 404 to reading an application must read
// exactly like missing, the answer about one that does not exist.
func checkAppRoutes(t *testing.T, c caller, missing []byte, call func(method, path, body string) (int, []byte)) {
	t.Helper()
	for _, rt := range appRoutes {
		for _, target := range []struct {
			app         string
			read, write int
		}{{"shop", c.ownRead, c.ownOperate}, {"billing", c.othRead, c.othOperate}} {
			want := target.read
			if rt.operate {
				want = target.write
			}
			if rt.ok != 0 && want/100 == 2 {
				want = rt.ok
			}
			path := "/api/v1/applications/" + target.app + rt.path
			code, b := call(rt.method, path, rt.body)
			if code != want {
				t.Errorf("%s %s: %d, want %d: %s", rt.method, path, code, want, b)
			}
			// Not allowed to know is answered exactly like "does not exist".
			if want == 404 && rt.method == "GET" && rt.path == "" {
				if got, nope := string(b), strings.ReplaceAll(string(missing), "nope", target.app); got != nope {
					t.Errorf("the 404 for %s tells it apart from a missing application:\n%s\n%s", target.app, got, nope)
				}
			}
		}
	}
}

// globalRoute is a GET outside any application and the status a caller's
// row wants for it.
type globalRoute struct {
	path string
	want int
}

// checkGlobalRoutes sends each GET of routes through call and checks its
// status; the application list must hold exactly the applications the
// caller's row sees.
func checkGlobalRoutes(t *testing.T, c caller, routes []globalRoute, call func(method, path, body string) (int, []byte)) {
	t.Helper()
	for _, g := range routes {
		code, b := call("GET", g.path, "")
		if code != g.want {
			t.Errorf("GET %s: %d, want %d: %s", g.path, code, g.want, b)
		}
		if g.path == "/api/v1/applications" && code == 200 {
			var names []string
			for _, it := range decode[api.ApplicationList](t, b).Items {
				names = append(names, it.Name)
			}
			if strings.Join(names, ",") != strings.Join(c.sees, ",") {
				t.Errorf("the list shows %v, want %v", names, c.sees)
			}
		}
	}
}

// streamStatus opens the event stream and returns its status at once.
func streamStatus(t *testing.T, e *env, token string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/events", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAPI_eventStreamHoldsOnlyTheCallersApplications(t *testing.T) {
	e, _ := newAccessEnv(t)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+fileTokens["shop-viewer"])
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	r := &sseReader{resp: resp, sc: bufio.NewScanner(resp.Body)}
	if f := r.next(t); !strings.HasPrefix(f.comment, "retry") {
		t.Fatalf("first frame %+v", f)
	}
	// billing's sync goes first and entirely; then shop's.
	if resp, b := e.do(t, "POST", "/api/v1/applications/billing/sync?wait=true", adminToken, ""); resp.StatusCode != 200 {
		t.Fatalf("sync billing: %d %s", resp.StatusCode, b)
	}
	if resp, b := e.do(t, "POST", "/api/v1/applications/shop/sync?wait=true", adminToken, ""); resp.StatusCode != 200 {
		t.Fatalf("sync shop: %d %s", resp.StatusCode, b)
	}
	for {
		f := r.nextEvent(t)
		var ev struct{ App string }
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.App != "shop" {
			t.Fatalf("a shop viewer got an event of %q: %s", ev.App, f.data)
		}
		if f.event == "sync.succeeded" {
			return
		}
	}
}

func TestAPI_tokenRemovedFromTheTokensFileIsRefusedOnTheNextRequest(t *testing.T) {
	e, path := newAccessEnv(t)
	tok := fileTokens["shop-operator"]
	if resp, b := e.do(t, "GET", "/api/v1/applications/shop", tok, ""); resp.StatusCode != 200 {
		t.Fatalf("before: %d %s", resp.StatusCode, b)
	}
	writeTokensFile(t, path, "shop-viewer")
	if resp, _ := e.do(t, "GET", "/api/v1/applications/shop", tok, ""); resp.StatusCode != 401 {
		t.Fatalf("after removal: %d, want 401", resp.StatusCode)
	}
	if resp, _ := e.do(t, "GET", "/api/v1/applications/shop", fileTokens["shop-viewer"], ""); resp.StatusCode != 200 {
		t.Fatalf("the token still in the file: %d, want 200", resp.StatusCode)
	}
	if resp, _ := e.do(t, "GET", "/api/v1/applications/shop", adminToken, ""); resp.StatusCode != 200 {
		t.Fatalf("the global admin after the reload: %d, want 200", resp.StatusCode)
	}
}

func TestAPI_everyWriteIsAuditedOnceWithoutTokens(t *testing.T) {
	e, _ := newAccessEnv(t)
	e.do(t, "POST", "/api/v1/applications/shop/sync", fileTokens["shop-operator"], `{"prune":true,"dryRun":true}`)
	e.do(t, "POST", "/api/v1/applications/shop/refresh", fileTokens["shop-viewer"], "")
	e.do(t, "POST", "/api/v1/applications/billing/rollback", fileTokens["shop-operator"], `{"revision":1}`)
	e.do(t, "POST", "/api/v1/applications/billing/rollback", adminToken, `{"revision":1}`)
	e.do(t, "GET", "/api/v1/applications/shop", fileTokens["shop-operator"], "")

	resp, b := e.do(t, "GET", "/api/v1/audit", adminToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("audit: %d %s", resp.StatusCode, b)
	}
	items := decode[api.AuditList](t, b).Items
	type row struct {
		who, role, project, route, app string
		status                         int
	}
	want := []row{
		{"shop-operator", "operator", "shop", "POST /api/v1/applications/{name}/sync", "shop", 202},
		{"shop-viewer", "viewer", "shop", "POST /api/v1/applications/{name}/refresh", "shop", 403},
		{"shop-operator", "", "bank", "POST /api/v1/applications/{name}/rollback", "billing", 404},
		{"admin", "admin", "bank", "POST /api/v1/applications/{name}/rollback", "billing", 202},
	}
	if len(items) != len(want) {
		t.Fatalf("%d audit entries, want %d (reads are not audited): %s", len(items), len(want), b)
	}
	for i, w := range want {
		it := items[i]
		got := row{it.Who, string(it.Role), it.Project, it.Route, it.App, it.Status}
		if got != w {
			t.Errorf("entry %d = %+v, want %+v", i, got, w)
		}
		if it.Time.IsZero() {
			t.Errorf("entry %d has no time", i)
		}
	}
	if o := items[0].Options; o["prune"] != "true" || o["dry_run"] != "true" {
		t.Errorf("sync options = %v", o)
	}
	if o := items[3].Options; o["revision"] != "1" {
		t.Errorf("rollback options = %v", o)
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "component=audit"); n != len(want) {
		t.Errorf("%d audit log lines, want %d", n, len(want))
	}
	secrets := []string{adminToken, readToken}
	for _, tok := range fileTokens {
		secrets = append(secrets, tok, access.Digest(tok))
	}
	for _, s := range secrets {
		if strings.Contains(string(b), s) || strings.Contains(logs, s) {
			t.Errorf("a token or its digest is in the audit or the logs: %s", s)
		}
	}
}

func TestAPI_auditRingIsBounded(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Audit = access.NewAudit(2, nil) })
	for range 3 {
		e.do(t, "POST", "/api/v1/applications/shop/refresh", adminToken, "")
	}
	_, b := e.do(t, "GET", "/api/v1/audit", adminToken, "")
	if n := len(decode[api.AuditList](t, b).Items); n != 2 {
		t.Fatalf("%d entries kept, want 2", n)
	}
}

func TestTheSwarmListIsReadByGlobalRolesOnly(t *testing.T) {
	e, _ := newAccessEnv(t)
	e.ctl.SwarmList = []api.SwarmStatus{
		{Name: "eu", Reachable: true, Host: "tcp://10.0.0.1:2376", Hosts: []string{"tcp://10.0.0.1:2376"}, Nodes: 3, Managers: 3, EngineVersion: "20.10.24", Applications: 1},
		{Name: "local", Reachable: false, Error: "connection refused", Host: "unix:///var/run/docker.sock"},
	}
	for _, c := range callers {
		resp, b := e.do(t, "GET", "/api/v1/swarms", c.token, "")
		if resp.StatusCode != c.metrics {
			t.Errorf("%s: status %d, want %d (as for /metrics: the list counts every application)", c.name, resp.StatusCode, c.metrics)
			continue
		}
		if resp.StatusCode != 200 {
			continue
		}
		list := decode[api.SwarmList](t, b)
		if len(list.Items) != 2 || list.Items[0].Name != "eu" || list.Items[0].Nodes != 3 || list.Items[1].Reachable {
			t.Errorf("%s: list %+v", c.name, list)
		}
	}
}

func TestAControllerWithoutSwarmsAnswersTheSwarmList501(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Controller = apitest.NewMinimalController(apitest.Sample()...) })
	resp, b := e.do(t, "GET", "/api/v1/swarms", readToken, "")
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(b), "SwarmLister") {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
}

func TestAPI_theApplicationListNamesEachApplicationsProject(t *testing.T) {
	e, _ := newAccessEnv(t)
	resp, b := e.do(t, "GET", "/api/v1/applications", adminToken, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/applications = %d %s", resp.StatusCode, b)
	}
	var list api.ApplicationList
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range list.Items {
		got[it.Name] = it.Project
	}
	if got["shop"] != "shop" || got["billing"] != "bank" || len(got) != 2 {
		t.Errorf("projects by application = %v, want shop:shop billing:bank", got)
	}
}
