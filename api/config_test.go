package api_test

import (
	"testing"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
)

func TestAPI_theListSaysWhyTheNewestApplicationsFileWasNotLoadedToGlobalRolesOnly(t *testing.T) {
	path := t.TempDir() + "/tokens.yaml"
	writeTokensFile(t, path, "shop-viewer")
	tf, err := access.OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const problem = "apps.yaml@1a2b3c4d: applications file is invalid: line 3: unknown field"
	e := newEnv(t, func(o *api.Options) {
		o.TokenFile = tf
		o.Policy = access.NewPolicy(testProjects)
		o.ConfigProblem = func() string { return problem }
	})
	for _, tc := range []struct {
		token string
		want  string
	}{{readToken, problem}, {fileTokens["shop-viewer"], ""}} {
		resp, body := e.do(t, "GET", "/api/v1/applications", tc.token, "")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if got := decode[api.ApplicationList](t, body).ConfigProblem; got != tc.want {
			t.Errorf("config problem %q, want %q", got, tc.want)
		}
	}
}
