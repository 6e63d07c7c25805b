package router

import (
	"net/http"
	"sync/atomic"
)

// ConfigServer serves the latest dynamic configuration to Traefik's HTTP
// provider (--providers.http.endpoint points at the path it is mounted on).
// It is safe for concurrent use: the pass calls Set, Traefik polls.
//
// Until the first Set it answers 503, so a Traefik that already routes keeps
// its configuration while a restarted Flotilla has not yet decided the
// weights, instead of being handed an empty one that would drop every route.
// Traefik retries a failed poll with a backoff that starts at half a second
// and is reset every 30 s, so the first Set is read within about 20 s even
// after a long outage, not at the next poll interval.
type ConfigServer struct {
	current atomic.Pointer[[]byte]
}

// Set renders routes (see DynamicConfig) and serves them from now on. On an
// error the previous configuration is kept and still served.
func (s *ConfigServer) Set(routes []Route) error {
	b, err := DynamicConfig(routes)
	if err != nil {
		return err
	}
	s.current.Store(&b)
	return nil
}

// ServeHTTP answers GET and HEAD with the latest configuration.
func (s *ConfigServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "router configuration: only GET and HEAD", http.StatusMethodNotAllowed)
		return
	}
	b := s.current.Load()
	if b == nil {
		http.Error(w, "router configuration: not decided yet (Flotilla is starting)", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(*b)
}
