package backend

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/internal/swarmtest"
)

// listingRecorder keeps the answer of every network listing a client's
// requests get, so a test can say what a deploy read.
type listingRecorder struct {
	base    http.RoundTripper
	mu      sync.Mutex
	answers [][]byte
}

func (l *listingRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/networks") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	l.mu.Lock()
	l.answers = append(l.answers, body)
	l.mu.Unlock()
	return resp, nil
}

func (l *listingRecorder) take() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.answers
	l.answers = nil
	return out
}

// recordingBackend is a backend on the shared swarm whose network listings
// are recorded.
func recordingBackend(t *testing.T) (*Backend, *listingRecorder) {
	t.Helper()
	shared := swarmtest.Client(t)
	tr, err := dialTransport(shared.DaemonHost(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &listingRecorder{base: tr}
	b, err := New(context.Background(), Options{Host: shared.DaemonHost(), Transport: rec, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return b, rec
}

func TestDeployStack_readsOnlyTheNetworksItDeclaresAndAttachesTo_notTheSwarmsOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := swarmtest.Client(t)
	stack := swarmtest.Name(t, "netlist")
	ext := stack + "-ext"
	// Networks a listing filtered by the declared names must not carry:
	// unrelated ones. One whose name only starts like the stack's own may be
	// carried, since a current daemon's name filter matches it too (20.10's
	// left it out); it must never stand in for the declared network.
	others := []string{"other-" + stack + "-1", "other-" + stack + "-2"}
	prefixed := stack + "_front-not"
	for _, name := range append([]string{ext, prefixed}, others...) {
		created, err := api.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "overlay"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := api.NetworkRemove(context.Background(), created.ID, client.NetworkRemoveOptions{}); err != nil {
				t.Errorf("remove network %s: %v", name, err)
			}
		})
	}
	swarmtest.Cleanup(t, stack)
	b, rec := recordingBackend(t)

	allowed := b.WithAllowedReferences(application.Allow{Networks: []string{ext}})
	r := render(t, stack, fixture{ExternalNet: ext})
	req := charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets}
	first, err := allowed.DeployStack(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Created) == 0 {
		t.Fatalf("first deploy created nothing: %+v", first)
	}
	listings := rec.take()
	if len(listings) != 1 {
		t.Errorf("the first deploy listed networks %d times, want once", len(listings))
	}
	read := 0
	for _, body := range listings {
		read += len(body)
		for _, name := range others {
			if bytes.Contains(body, []byte(`"Name":"`+name+`"`)) {
				t.Errorf("a deploy's network listing carried %s, a network the stack neither declares nor attaches to", name)
			}
		}
		if bytes.Contains(body, []byte(`"Name":"`+prefixed+`"`)) {
			t.Logf("this daemon's name filter matched %s, which only starts like a declared network", prefixed)
		}
	}
	if !bytes.Contains(bytes.Join(listings, nil), []byte(`"Name":"`+ext+`"`)) {
		t.Errorf("the listing did not carry the external network %s the guards and checks read", ext)
	}
	t.Logf("network listings of the first deploy: %d, %d bytes", len(listings), read)
	nets, err := b.LiveNetworks(ctx, stack)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := nets[stack+"_front"]; !ok {
		t.Fatalf("declared network %s_front not created (a same-prefixed network must not stand in for it): %v", stack, nets)
	}
	rec.take()

	again, err := allowed.DeployStack(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Created)+len(again.Updated) != 0 {
		t.Errorf("an unchanged redeploy wrote: created %v, updated %v", again.Created, again.Updated)
	}
	if n := len(rec.take()); n != 1 {
		t.Errorf("an unchanged redeploy listed networks %d times, want once", n)
	}
}

func TestDeployStack_findsAnExternalNetworkNamedByItsID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := swarmtest.Client(t)
	stack := swarmtest.Name(t, "netid")
	created, err := api.NetworkCreate(ctx, stack+"-byid", client.NetworkCreateOptions{Driver: "overlay", Attachable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := api.NetworkRemove(context.Background(), created.ID, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("remove network: %v", err)
		}
	})
	swarmtest.Cleanup(t, stack)
	b := newBackend(t)

	r := render(t, stack, fixture{ExternalNet: created.ID})
	res, err := b.WithAllowedReferences(application.Allow{Networks: []string{created.ID}}).DeployStack(ctx,
		charts.DeployRequest{Stack: stack, Manifest: r.Manifest, Secrets: r.Secrets})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) == 0 {
		t.Fatalf("deploy created nothing: %+v", res)
	}
	web := services(t, b, stack)["web"]
	found := false
	for _, n := range web.Spec.TaskTemplate.Networks {
		found = found || n.Target == created.ID || n.Target == stack+"-byid"
	}
	if !found {
		t.Errorf("web is not attached to the external network given by id: %+v", web.Spec.TaskTemplate.Networks)
	}
}
