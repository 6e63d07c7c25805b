package web_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/api/apitest"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/web"
)

// evilPage tries every way a page of another origin has to make the
// operator's browser write to the API: a form, a "simple" cross-origin
// fetch that needs no preflight, and a fetch with the real headers, which
// needs a preflight the API never grants.
const evilPage = `<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="%[1]s/api/v1/applications/shop/sync">
<input name='{"prune":true,"x":"' value='"}'></form>
<script>
window.tried = 0;
const done = () => { window.tried++; };
fetch('%[1]s/api/v1/applications/shop/sync', {method: 'POST', mode: 'no-cors',
  headers: {'Content-Type': 'text/plain'}, body: '{"prune":true}'}).then(done, done);
fetch('%[1]s/api/v1/applications/shop/sync', {method: 'POST',
  headers: {'Content-Type': 'application/json', 'X-Flotilla-Request': '1'}, body: '{"prune":true}'}).then(done, done);
document.getElementById('f').submit();
document.querySelector('iframe').onload = done;
</script></body></html>`

func TestBrowser_aPageOfAnotherOriginCannotTriggerASyncEvenWithoutAuth(t *testing.T) {
	ctl := apitest.NewController(sample()...)
	var mu sync.Mutex
	var posts []string
	h := api.New(api.Options{Controller: ctl, NoAuth: true, UI: web.Handler(),
		Events: events.NewBroker(events.BrokerOptions{}), Logger: slog.New(slog.DiscardHandler)})
	apiSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			posts = append(posts, r.Header.Get("Content-Type"))
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { apiSrv.CloseClientConnections(); apiSrv.Close() })
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, evilPage, apiSrv.URL)
	}))
	t.Cleanup(evil.Close)

	ctx := newTab(t)
	run(t, ctx, chromedp.Navigate(evil.URL+"/"))
	waitJS(t, ctx, "every attempt to settle", `window.tried >= 3`)
	mu.Lock()
	got := append([]string(nil), posts...)
	mu.Unlock()
	// The form and the simple fetch reach the server: the browser sends
	// them. Only the API's refusal stands between them and a sync.
	if len(got) < 2 {
		t.Fatalf("the server saw %d cross-origin POSTs (%q); the test did not exercise the guard", len(got), got)
	}
	for _, ct := range got {
		if strings.HasPrefix(ct, "application/json") {
			t.Errorf("a cross-origin POST arrived with %q: the preflighted fetch was let through", ct)
		}
	}
	if syncs := ctl.Syncs(); len(syncs) != 0 {
		t.Fatalf("a page of another origin triggered syncs: %+v", syncs)
	}
}
