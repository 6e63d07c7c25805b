package router

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// decoded is the dynamic configuration read back generically, so tests
// assert on what Traefik would see, not on this package's structs.
type decoded struct {
	HTTP struct {
		Routers  map[string]map[string]any `json:"routers"`
		Services map[string]struct {
			Weighted *struct {
				Services []map[string]any `json:"services"`
			} `json:"weighted"`
			LoadBalancer *struct {
				Servers []map[string]any `json:"servers"`
			} `json:"loadBalancer"`
		} `json:"services"`
	} `json:"http"`
}

func decode(t *testing.T, b []byte) decoded {
	t.Helper()
	var d decoded
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return d
}

func canaryRoute() Route {
	return Route{
		Name:        "shop_web",
		Rule:        "Host(`shop.example.com`)",
		EntryPoints: []string{"websecure", "web"},
		Backends: []Backend{
			{Name: "stable", Weight: 90, URLs: []string{"http://shop_web:8080"}},
			{Name: "canary", Weight: 10, URLs: []string{"http://shop_web-canary:8080", "http://10.0.0.7:8080"}},
		},
	}
}

func TestDynamicConfig_structure(t *testing.T) {
	b, err := DynamicConfig([]Route{canaryRoute()})
	if err != nil {
		t.Fatal(err)
	}
	d := decode(t, b)
	if len(d.HTTP.Routers) != 1 {
		t.Fatalf("routers = %v, want one", d.HTTP.Routers)
	}
	r := d.HTTP.Routers["shop_web"]
	if r["rule"] != "Host(`shop.example.com`)" || r["service"] != "shop_web" {
		t.Errorf("router = %v", r)
	}
	if eps, _ := json.Marshal(r["entryPoints"]); string(eps) != `["web","websecure"]` {
		t.Errorf("entryPoints = %s, want sorted [web websecure]", eps)
	}
	if len(d.HTTP.Services) != 3 {
		t.Fatalf("services = %v, want the weighted one and one per backend", d.HTTP.Services)
	}
	w := d.HTTP.Services["shop_web"].Weighted
	if w == nil || len(w.Services) != 2 {
		t.Fatalf("weighted service = %+v", w)
	}
	// Children sorted by name: canary before stable.
	if w.Services[0]["name"] != "shop_web.canary" || w.Services[0]["weight"] != 10.0 ||
		w.Services[1]["name"] != "shop_web.stable" || w.Services[1]["weight"] != 90.0 {
		t.Errorf("weighted children = %v", w.Services)
	}
	lb := d.HTTP.Services["shop_web.canary"].LoadBalancer
	if lb == nil || len(lb.Servers) != 2 || lb.Servers[0]["url"] != "http://10.0.0.7:8080" || lb.Servers[1]["url"] != "http://shop_web-canary:8080" {
		t.Errorf("canary load balancer = %+v, want both URLs, sorted", lb)
	}
	if d.HTTP.Services["shop_web.stable"].LoadBalancer == nil {
		t.Error("no load balancer for the stable backend")
	}
	if got := MetricService("shop_web", "canary"); got != "shop_web.canary@http" {
		t.Errorf("MetricService = %q", got)
	}
}

// Traefik reads an absent weight as 1: a zero weight must be written out.
func TestDynamicConfig_zeroWeightIsWritten(t *testing.T) {
	r := canaryRoute()
	r.Backends[0].Weight, r.Backends[1].Weight = 0, 100
	b, err := DynamicConfig([]Route{r})
	if err != nil {
		t.Fatal(err)
	}
	d := decode(t, b)
	var stable map[string]any
	for _, c := range d.HTTP.Services["shop_web"].Weighted.Services {
		if c["name"] == "shop_web.stable" {
			stable = c
		}
	}
	if w, ok := stable["weight"]; !ok || w != 0.0 {
		t.Fatalf("stable child = %v, want an explicit weight 0", stable)
	}
	if d.HTTP.Services["shop_web.stable"].LoadBalancer == nil {
		t.Error("the weight-0 backend's service was dropped; it must stay configured")
	}
}

func TestDynamicConfig_sameBytesForAnyOrder(t *testing.T) {
	a := canaryRoute()
	other := Route{Name: "api", Rule: "PathPrefix(`/api`)", Backends: []Backend{{Name: "blue", Weight: 1, URLs: []string{"http://api-blue"}}}}
	first, err := DynamicConfig([]Route{a, other})
	if err != nil {
		t.Fatal(err)
	}
	// The same routes, every list reversed.
	b := a
	b.EntryPoints = []string{"web", "websecure"}
	b.Backends = []Backend{a.Backends[1], a.Backends[0]}
	b.Backends[0].URLs = []string{"http://10.0.0.7:8080", "http://shop_web-canary:8080"}
	second, err := DynamicConfig([]Route{other, b})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("different bytes for the same routes:\n%s\n%s", first, second)
	}
	if a.Backends[1].URLs[0] != "http://shop_web-canary:8080" || a.EntryPoints[0] != "websecure" {
		t.Error("DynamicConfig sorted its caller's slices in place")
	}
}

func TestDynamicConfig_noRoutes(t *testing.T) {
	b, err := DynamicConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := decode(t, b)
	if d.HTTP.Routers == nil || len(d.HTTP.Routers) != 0 || len(d.HTTP.Services) != 0 {
		t.Fatalf("got %s, want empty routers and services", b)
	}
}

func TestServiceName_sanitises(t *testing.T) {
	for _, tc := range []struct{ route, backend, want string }{
		{"shop_web", "canary", "shop_web.canary"},
		{"shop.web@prod", "v2.1", "shop-web-prod.v2-1"},
		{"a b/c", "ü", "a-b-c.-"},
	} {
		if got := ServiceName(tc.route, tc.backend); got != tc.want {
			t.Errorf("ServiceName(%q, %q) = %q, want %q", tc.route, tc.backend, got, tc.want)
		}
	}
}

func TestDynamicConfig_refusals(t *testing.T) {
	ok := func() Route { return canaryRoute() }
	for _, tc := range []struct {
		name   string
		routes func() []Route
		want   string
	}{
		{"empty route name", func() []Route { r := ok(); r.Name = ""; return []Route{r} }, "route name is empty"},
		{"duplicate once sanitised", func() []Route {
			a, b := ok(), ok()
			b.Name = "shop.web"
			a.Name = "shop-web"
			return []Route{a, b}
		}, `route "shop.web": name is the same as route "shop-web" once sanitised`},
		{"empty rule", func() []Route { r := ok(); r.Rule = " "; return []Route{r} }, `route "shop_web": rule is empty`},
		{"no backends", func() []Route { r := ok(); r.Backends = nil; return []Route{r} }, `route "shop_web": no backends`},
		{"empty backend name", func() []Route { r := ok(); r.Backends[1].Name = ""; return []Route{r} }, "a backend name is empty"},
		{"duplicate backend", func() []Route { r := ok(); r.Backends[1].Name = "stable"; return []Route{r} }, `backend "stable": name is the same as backend "stable"`},
		{"negative weight", func() []Route { r := ok(); r.Backends[1].Weight = -1; return []Route{r} }, `backend "canary": weight -1 is negative`},
		{"all weights zero", func() []Route {
			r := ok()
			r.Backends[0].Weight, r.Backends[1].Weight = 0, 0
			return []Route{r}
		}, "every backend has weight 0"},
		{"no URLs", func() []Route { r := ok(); r.Backends[0].URLs = nil; return []Route{r} }, `backend "stable": no URLs`},
		{"relative URL", func() []Route { r := ok(); r.Backends[0].URLs = []string{"shop_web:8080"}; return []Route{r} }, `URL "shop_web:8080" is not an absolute http or https URL`},
		{"other scheme", func() []Route { r := ok(); r.Backends[0].URLs = []string{"h2c://x:1"}; return []Route{r} }, "not an absolute http or https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DynamicConfig(tc.routes())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestConfigServer_serves(t *testing.T) {
	var s ConfigServer
	get := func(method string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(method, "/router/traefik", nil))
		return rec
	}
	if rec := get(http.MethodGet); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("before Set: %d, want 503 so that Traefik keeps what it has", rec.Code)
	}
	if err := s.Set([]Route{canaryRoute()}); err != nil {
		t.Fatal(err)
	}
	want, _ := DynamicConfig([]Route{canaryRoute()})
	rec := get(http.MethodGet)
	if rec.Code != http.StatusOK || rec.Body.String() != string(want) || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("after Set: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	bad := canaryRoute()
	bad.Backends[0].Weight = -5
	if err := s.Set([]Route{bad}); err == nil {
		t.Fatal("Set accepted a negative weight")
	}
	if rec := get(http.MethodGet); rec.Body.String() != string(want) {
		t.Fatalf("a refused Set changed what is served: %s", rec.Body)
	}
	if rec := get(http.MethodHead); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("HEAD: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	if rec := get(http.MethodPost); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", rec.Code)
	}
}
