package reconcile

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A repository's rollout names the URLs its analysis calls, and the
// controller makes those calls from its own network: a URL the
// applications file does not grant refuses the pass before anything is
// deployed or called, naming the service, the field and the host, never
// the URL's token.
func TestAnAnalysisURLTheApplicationsFileDoesNotGrantIsRefused(t *testing.T) {
	var calls atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = w.Write([]byte(`{"result":"pass"}`))
	}))
	t.Cleanup(hook.Close)
	gated := func(tag string) string {
		return gatedCanaryCompose(tag, `webhook: {url: "`+hook.URL+`/judge?token=s3cret"}`)
	}
	for _, c := range []struct {
		name   string
		grants []string
	}{
		{"nothing granted", nil},
		{"another port", []string{strings.TrimSuffix(hook.URL, hook.URL[strings.LastIndex(hook.URL, ":"):]) + ":1"}},
		{"another path", []string{hook.URL + "/other"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, f, ctl, clk := canaryOnMinimal(t, c.grants...)
			f.commit(t, map[string]string{"docker-compose.yml": gated("1")})
			res := mustReconcile(t, ctl, "shop")
			if res.Err == nil {
				t.Fatal("the pass deployed a rollout whose analysis URL is not granted")
			}
			msg := res.Err.Error()
			for _, want := range []string{"services.web.x-flotilla.rollout.analysis.webhook.url", hook.URL + "/judge", "allow.analysisURLs"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("error %q shows the URL's token", msg)
			}
			if n := b.Writes(); n != 0 {
				t.Errorf("%d writes to the swarm: nothing may be deployed", n)
			}
			clk.add(time.Minute)
			mustReconcile(t, ctl, "shop")
			if n := calls.Load(); n != 0 {
				t.Errorf("the webhook was called %d times", n)
			}
		})
	}
	t.Run("granted", func(t *testing.T) {
		b, f, ctl, _ := canaryOnMinimal(t, hook.URL+"/judge")
		f.commit(t, map[string]string{"docker-compose.yml": gated("1")})
		reconcileOK(t, ctl)
		if b.Writes() == 0 {
			t.Fatal("a granted analysis URL deployed nothing")
		}
	})
}
