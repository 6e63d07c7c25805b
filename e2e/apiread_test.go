package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
)

// The secret tests (SOPS and every store) read a running controller's API
// the same way, and keep every answer for the scan that finds no plaintext
// left the controller; these are the reads they share.

// apiReader reads a controller's API with a token.
type apiReader struct {
	t      *testing.T
	server string
}

// getAny answers GET path as token, whatever the status.
func (a apiReader) getAny(token, path string) (int, string) {
	a.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, a.server+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// get is getAny that fails the test on anything but 200.
func (a apiReader) get(token, path string) string {
	a.t.Helper()
	code, body := a.getAny(token, path)
	if code != http.StatusOK {
		a.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}

// status is the application's status; record, when set, keeps the answer.
func (a apiReader) status(token, app string, record *outputs) application.Status {
	a.t.Helper()
	path := "/api/v1/applications/" + app
	body := a.get(token, path)
	if record != nil {
		record.add("GET "+path, body)
	}
	var st application.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		a.t.Fatal(err)
	}
	return st
}

// history is the application's release records, newest first.
func (a apiReader) history(token, app string, record *outputs) []charts.Release {
	a.t.Helper()
	path := "/api/v1/applications/" + app + "/history"
	body := a.get(token, path)
	if record != nil {
		record.add("GET "+path, body)
	}
	var h api.HistoryList
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		a.t.Fatal(err)
	}
	return h.Items
}

// collect keeps, for each role's token, the answers of the list, the
// application, its history and its diff.
func (a apiReader) collect(app string, tokens map[string]string, record *outputs) {
	a.t.Helper()
	for role, token := range tokens {
		for _, path := range []string{"/api/v1/applications", "/api/v1/applications/" + app,
			"/api/v1/applications/" + app + "/history", "/api/v1/applications/" + app + "/diff"} {
			record.add("GET "+path+" as "+role, a.get(token, path))
		}
	}
}

// mountedSecret is the swarm secret service svc of stack mounts, "" when
// it mounts none or several.
func mountedSecret(t *testing.T, cl *client.Client, stack, svc string) string {
	t.Helper()
	s, err := cl.ServiceInspect(context.Background(), stack+"_"+svc, client.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sec := s.Service.Spec.TaskTemplate.ContainerSpec.Secrets; len(sec) == 1 {
		return sec[0].SecretName
	}
	return ""
}

// notificationSink receives the controller's webhook notifications into
// record and returns the URL file an applications file names.
func notificationSink(t *testing.T, dir string, record *outputs) string {
	t.Helper()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		record.add("notification", string(body))
	}))
	t.Cleanup(sink.Close)
	urlFile := filepath.Join(dir, "sink-url")
	if err := os.WriteFile(urlFile, []byte(sink.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return urlFile
}
