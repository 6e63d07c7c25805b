// Package router is Flotilla's side of the router that splits traffic during
// a progressive rollout: Traefik v3, driven through its HTTP provider.
//
// The rollout step decisions are made elsewhere (the rollouts package, run by
// the reconcile pass); this package only translates them and reads back the
// evidence. DynamicConfig turns the weights a step wants into the dynamic
// configuration Traefik polls, ConfigServer serves the latest one from the API,
// and Scrape and Compare turn Traefik's Prometheus endpoint into per-backend
// requests, errors and latency between two analysis points. Nothing here talks
// to the swarm; it speaks HTTP only, and everything but the two HTTP entry
// points is a pure function of its input.
//
// Traefik is started with (besides its entry points):
//
//	--providers.http.endpoint=<Flotilla API>/<path ConfigServer is mounted on>
//	--providers.http.pollInterval=2s          (default 5s)
//	--metrics.prometheus=true
//	--metrics.prometheus.entryPoint=<an entry point Flotilla can reach>
//	--metrics.prometheus.buckets=0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5
//
// The buckets are optional; Traefik's default (0.1,0.3,1.2,5) only brackets
// the 95th percentile coarsely (see Window.P95Low).
package router

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Route is one routed application: requests matching Rule on EntryPoints are
// spread over Backends in proportion to their weights.
type Route struct {
	// Name identifies the route; Traefik's router and weighted service are
	// named after it (see RouterName). Required.
	Name string
	// Rule is a Traefik v3 rule, e.g. "Host(`shop.example.com`)". Required;
	// Traefik checks its syntax when it loads the configuration.
	Rule string
	// EntryPoints are Traefik entry point names; empty means Traefik's
	// default entry points.
	EntryPoints []string
	// Backends share the route's traffic. At least one, and at least one with
	// a positive weight.
	Backends []Backend
}

// Backend is one version of the application behind a route (stable and
// canary, or blue and green).
type Backend struct {
	// Name identifies the backend within its route (e.g. "stable",
	// "canary"); its metrics carry ServiceName(route, backend). Required.
	Name string
	// Weight is the backend's share of the route's traffic, relative to the
	// other backends' weights. Zero is valid: the backend stays configured and
	// keeps its metrics series but receives nothing, so moving traffic back to
	// it is a weight change, not a new service.
	Weight int
	// URLs are the backend's servers, e.g. "http://shop_web-canary:8080"
	// (Traefik spreads the backend's share over them evenly). At least one.
	URLs []string
}

// Provider is the name Traefik gives the HTTP provider: every name this
// package emits is qualified with it in Traefik's API and metrics.
const Provider = "http"

// RouterName is the name of the Traefik router (and of the weighted service)
// of a route, unqualified.
func RouterName(route string) string { return sanitise(route) }

// ServiceName is the name of the Traefik load-balancer service of one backend
// of a route, unqualified: the route and the backend, sanitised, joined by a
// dot (which sanitising never leaves inside either part).
func ServiceName(route, backend string) string {
	return sanitise(route) + "." + sanitise(backend)
}

// MetricService is the value of the service label Traefik puts on a
// backend's metrics, e.g. "shop.canary@http": what Compare is given.
func MetricService(route, backend string) string {
	return ServiceName(route, backend) + "@" + Provider
}

// sanitise keeps letters, digits, '-' and '_' and turns anything else into
// '-': '@' is Traefik's provider separator, '.' is ours, and the rest would
// need quoting in a rule, a URL path of Traefik's API, or a log line.
func sanitise(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, name)
}

// The shape of Traefik's dynamic configuration, only the keys this package
// writes. Maps encode with sorted keys, which with the sorted slices makes the
// output byte-identical for the same routes: Traefik's HTTP provider hashes
// what it polls and reloads only when the bytes change.
type dynamicConfig struct {
	HTTP httpConfig `json:"http"`
}

type httpConfig struct {
	Routers  map[string]traefikRouter  `json:"routers"`
	Services map[string]traefikService `json:"services"`
}

type traefikRouter struct {
	Rule        string   `json:"rule"`
	EntryPoints []string `json:"entryPoints,omitempty"`
	Service     string   `json:"service"`
}

type traefikService struct {
	Weighted     *weighted     `json:"weighted,omitempty"`
	LoadBalancer *loadBalancer `json:"loadBalancer,omitempty"`
}

type weighted struct {
	Services []weightedChild `json:"services"`
}

type weightedChild struct {
	Name string `json:"name"`
	// Not omitempty: Traefik reads an absent weight as 1, so a zero weight
	// must be written out.
	Weight int `json:"weight"`
}

type loadBalancer struct {
	Servers []server `json:"servers"`
}

type server struct {
	URL string `json:"url"`
}

// DynamicConfig renders routes as the JSON Traefik's HTTP provider reads:
// per route, a router (RouterName) to a weighted service of the same name,
// over one load-balancer service per backend (ServiceName). The same routes,
// in any order, give the same bytes. It refuses, naming the field, an empty
// or duplicate name (after sanitising), an empty rule, a negative weight, a
// route whose weights are all zero (Traefik would answer 503), and a server
// URL that is not absolute http or https.
func DynamicConfig(routes []Route) ([]byte, error) {
	cfg := dynamicConfig{HTTP: httpConfig{
		Routers:  map[string]traefikRouter{},
		Services: map[string]traefikService{},
	}}
	routeOf := map[string]string{} // sanitised route name -> original
	for _, r := range routes {
		if err := addRoute(&cfg.HTTP, routeOf, r); err != nil {
			return nil, err
		}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("router: encode dynamic configuration: %w", err)
	}
	return append(b, '\n'), nil
}

func addRoute(cfg *httpConfig, routeOf map[string]string, r Route) error {
	if r.Name == "" {
		return fmt.Errorf("router: route name is empty")
	}
	field := fmt.Sprintf("route %q", r.Name)
	name := RouterName(r.Name)
	if other, dup := routeOf[name]; dup {
		return fmt.Errorf("router: %s: name is the same as route %q once sanitised (%s)", field, other, name)
	}
	routeOf[name] = r.Name
	if strings.TrimSpace(r.Rule) == "" {
		return fmt.Errorf("router: %s: rule is empty", field)
	}
	if len(r.Backends) == 0 {
		return fmt.Errorf("router: %s: no backends", field)
	}
	eps := append([]string(nil), r.EntryPoints...)
	sort.Strings(eps)
	cfg.Routers[name] = traefikRouter{Rule: r.Rule, EntryPoints: eps, Service: name}

	var children []weightedChild
	total := 0
	backendOf := map[string]string{}
	for _, b := range r.Backends {
		if b.Name == "" {
			return fmt.Errorf("router: %s: a backend name is empty", field)
		}
		bfield := fmt.Sprintf("%s: backend %q", field, b.Name)
		svc := ServiceName(r.Name, b.Name)
		if other, dup := backendOf[svc]; dup {
			return fmt.Errorf("router: %s: name is the same as backend %q once sanitised (%s)", bfield, other, svc)
		}
		backendOf[svc] = b.Name
		if b.Weight < 0 {
			return fmt.Errorf("router: %s: weight %d is negative", bfield, b.Weight)
		}
		total += b.Weight
		if len(b.URLs) == 0 {
			return fmt.Errorf("router: %s: no URLs", bfield)
		}
		servers := make([]server, 0, len(b.URLs))
		seen := map[string]bool{}
		for _, raw := range b.URLs {
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("router: %s: URL %q is not an absolute http or https URL", bfield, raw)
			}
			if !seen[raw] {
				seen[raw] = true
				servers = append(servers, server{URL: raw})
			}
		}
		sort.Slice(servers, func(i, j int) bool { return servers[i].URL < servers[j].URL })
		cfg.Services[svc] = traefikService{LoadBalancer: &loadBalancer{Servers: servers}}
		children = append(children, weightedChild{Name: svc, Weight: b.Weight})
	}
	if total == 0 {
		return fmt.Errorf("router: %s: every backend has weight 0 (Traefik would answer 503)", field)
	}
	sort.Slice(children, func(i, j int) bool { return children[i].Name < children[j].Name })
	// A route's weighted service shares its router's name; Traefik keeps
	// routers and services apart. No backend service can take it: those
	// names hold a dot, route names never do.
	cfg.Services[name] = traefikService{Weighted: &weighted{Services: children}}
	return nil
}
