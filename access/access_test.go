package access

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
)

func testPolicy() *Policy {
	return NewPolicy([]application.Project{
		{Name: "shop", Applications: []string{"shop-*"}, Roles: []application.RoleBinding{
			{Role: "viewer", Tokens: []string{"dash"}},
			{Role: "operator", Tokens: []string{"ci-shop", "dash-ops"}},
			{Role: "admin", Tokens: []string{"shop-lead"}},
		}},
		{Name: "bank", Applications: []string{"bank"}, Roles: []application.RoleBinding{
			{Role: "operator", Tokens: []string{"ci-bank", "dash-ops"}},
		}},
	})
}

func TestPolicy_Decide(t *testing.T) {
	p := testPolicy()
	for _, tc := range []struct {
		id   Identity
		op   Op
		app  string
		want Decision
	}{
		{Identity{Name: "dash"}, Read, "shop-web", Allow},
		{Identity{Name: "dash"}, Operate, "shop-web", Forbidden},
		{Identity{Name: "dash"}, Read, "bank", NotFound},
		{Identity{Name: "ci-shop"}, Operate, "shop-web", Allow},
		{Identity{Name: "ci-shop"}, Administer, "shop-web", Forbidden},
		{Identity{Name: "ci-shop"}, Read, "bank", NotFound},
		{Identity{Name: "ci-shop"}, Read, "loose", NotFound},
		{Identity{Name: "shop-lead"}, Administer, "shop-web", Allow},
		{Identity{Name: "dash-ops"}, Operate, "bank", Allow},
		{Identity{Name: "admin", Global: Admin}, Administer, "loose", Allow},
		{Identity{Name: "read", Global: Viewer}, Read, "bank", Allow},
		{Identity{Name: "read", Global: Viewer}, Operate, "bank", Forbidden},
		{Identity{Name: "nobody"}, Read, "shop-web", NotFound},
		{Identity{Name: "ci-shop"}, Op("new"), "shop-web", Forbidden},
	} {
		if got := p.Decide(tc.id, tc.op, tc.app); got != tc.want {
			t.Errorf("Decide(%+v, %s, %s) = %s, want %s", tc.id, tc.op, tc.app, got, tc.want)
		}
	}
}

func TestPolicy_SetProjectsTakesEffectOnTheNextDecision(t *testing.T) {
	p := testPolicy()
	p.SetProjects(nil)
	if d := p.Decide(Identity{Name: "ci-shop"}, Read, "shop-web"); d != NotFound {
		t.Fatalf("after the project was removed: %s, want not found", d)
	}
}

func TestDecideGlobal_projectRolesDoNotCount(t *testing.T) {
	if DecideGlobal(Identity{Name: "shop-lead"}, Administer) != Forbidden {
		t.Fatal("a project admin reached a global admin operation")
	}
	if DecideGlobal(Identity{Name: "admin", Global: Admin}, Administer) != Allow {
		t.Fatal("the global admin was refused")
	}
}

func writeTokens(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestTokenFile_removedTokenIsRefusedOnTheNextMatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, path, "tokens:\n  - {name: ci-shop, sha256: "+Digest("tok-a")+"}\n  - {name: dash, sha256: "+Digest("tok-b")+"}\n")
	tf, err := OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := tf.Match("tok-a"); !ok || name != "ci-shop" {
		t.Fatalf("Match(tok-a) = %q %v", name, ok)
	}
	if _, ok := tf.Match("tok-c"); ok {
		t.Fatal("an unknown token matched")
	}
	writeTokens(t, path, "tokens:\n  - {name: dash, sha256: "+Digest("tok-b")+"}\n")
	if _, ok := tf.Match("tok-a"); ok {
		t.Fatal("a removed token still matched")
	}
	if name, ok := tf.Match("tok-b"); !ok || name != "dash" {
		t.Fatalf("Match(tok-b) = %q %v", name, ok)
	}
}

func TestTokenFile_brokenFileRefusesEveryTokenUntilFixed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	good := "tokens:\n  - {name: dash, sha256: " + Digest("tok-b") + "}\n"
	writeTokens(t, path, good)
	tf, err := OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var reported []error
	tf.OnError = func(err error) { reported = append(reported, err) }
	writeTokens(t, path, "tokens: [{name: dash, sha265: x}]\n")
	for range 2 {
		if _, ok := tf.Match("tok-b"); ok {
			t.Fatal("a token matched while the file was broken")
		}
	}
	if len(reported) != 1 {
		t.Fatalf("OnError called %d times, want once", len(reported))
	}
	time.Sleep(10 * time.Millisecond) // a new mtime
	writeTokens(t, path, good)
	if _, ok := tf.Match("tok-b"); !ok {
		t.Fatal("the fixed file was not reloaded")
	}
}

func TestParseTokens_refusesBadEntriesWithTheirLine(t *testing.T) {
	_, err := ParseTokens("t.yaml", []byte(`tokens:
  - {name: ok, sha256: `+Digest("x")+`}
  - {name: admin, sha256: `+Digest("y")+`}
  - {name: ok, sha256: my-plain-token-value}
`))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"t.yaml:3: tokens[1].name", "global token", "t.yaml:4: tokens[2].name", "already used", "tokens[2].sha256"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "my-plain-token-value") {
		t.Errorf("error quotes the pasted value: %q", msg)
	}
	if _, err := ParseTokens("t.yaml", []byte("tokens: []\nextra: 1\n")); err == nil {
		t.Error("an unknown key was accepted")
	}
}

func TestAudit_keepsTheLatestEntriesOldestFirst(t *testing.T) {
	var buf bytes.Buffer
	a := NewAudit(2, slog.New(slog.NewTextHandler(&buf, nil)))
	for _, app := range []string{"a", "b", "c"} {
		a.Record(Entry{Who: "ci", Route: "POST /sync", App: app, Status: 202})
	}
	got := a.Entries()
	if len(got) != 2 || got[0].App != "b" || got[1].App != "c" {
		t.Fatalf("entries = %+v", got)
	}
	if n := strings.Count(buf.String(), "component=audit"); n != 3 {
		t.Fatalf("%d audit log lines, want 3:\n%s", n, buf.String())
	}
}

// FuzzParseTokens: any input is either a list of valid entries or an error
// that never repeats a sha256 value; it never panics.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte("tokens:\n  - {name: ci, sha256: " + Digest("x") + "}\n"))
	f.Add([]byte("tokens: [{name: admin, sha256: zz}]\n"))
	f.Add([]byte("tokens: &a [*a]\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ParseTokens("t.yaml", data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, e := range list {
			if !tokenNameRE.MatchString(e.Name) || contains(ReservedNames, e.Name) || seen[e.Name] || len(e.SHA256) != 64 {
				t.Fatalf("accepted a bad entry %+v", e)
			}
			seen[e.Name] = true
		}
	})
}

func TestTokenFile_rewriteWithinOneModificationTimeTickIsSeen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	// Same length, so size and (restored) mtime cannot tell them apart.
	before := "tokens:\n  - {name: ci-aaa, sha256: " + Digest("tok-a") + "}\n"
	after := "tokens:\n  - {name: ci-bbb, sha256: " + Digest("tok-b") + "}\n"
	if err := os.WriteFile(path, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if err := os.WriteFile(path, []byte(after), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if _, ok := tf.Match("tok-a"); ok {
		t.Fatal("the token rewritten away in the same tick still matched")
	}
	if name, ok := tf.Match("tok-b"); !ok || name != "ci-bbb" {
		t.Fatalf("Match(tok-b) = %q %v", name, ok)
	}
}

func TestPolicy_groupsBindRolesAndNeverMatchATokenName(t *testing.T) {
	p := NewPolicy([]application.Project{{Name: "shop", Applications: []string{"shop"}, Roles: []application.RoleBinding{
		{Role: "viewer", Tokens: []string{"shop-devs"}},
		{Role: "operator", Groups: []string{"shop-devs"}},
	}}})
	if got := p.RoleOn(Identity{Groups: []string{"other", "shop-devs"}}, "shop"); got != Operator {
		t.Errorf("a member of shop-devs: %q, want operator", got)
	}
	if got := p.RoleOn(Identity{Name: "shop-devs"}, "shop"); got != Viewer {
		t.Errorf("the token named shop-devs: %q, want viewer (the group binding is not for tokens)", got)
	}
	if got := p.Decide(Identity{Groups: []string{"billing-devs"}}, Read, "shop"); got != NotFound {
		t.Errorf("a member of another group: %v, want not found", got)
	}
}

func TestPolicy_logsTakeAnOperatorUnlessTheProjectLetsViewersReadThem(t *testing.T) {
	p := NewPolicy([]application.Project{
		{Name: "shop", Applications: []string{"shop-*"}, Roles: []application.RoleBinding{
			{Role: "viewer", Tokens: []string{"dash"}}, {Role: "operator", Tokens: []string{"ci"}}}},
		{Name: "open", Applications: []string{"open-*"}, ViewerLogs: true, Roles: []application.RoleBinding{
			{Role: "viewer", Tokens: []string{"dash"}}}},
	})
	for _, tc := range []struct {
		id   Identity
		app  string
		want Decision
	}{
		{Identity{Name: "dash"}, "shop-web", Forbidden},
		{Identity{Name: "ci"}, "shop-web", Allow},
		{Identity{Name: "read", Global: Viewer}, "shop-web", Forbidden},
		{Identity{Name: "read", Global: Viewer}, "loose", Forbidden},
		{Identity{Name: "dash"}, "open-web", Allow},
		{Identity{Name: "read", Global: Viewer}, "open-web", Allow},
		{Identity{Name: "ci"}, "open-web", NotFound},
	} {
		if got := p.Decide(tc.id, ReadLogs, tc.app); got != tc.want {
			t.Errorf("Decide(%+v, logs, %s) = %s, want %s", tc.id, tc.app, got, tc.want)
		}
	}
}
