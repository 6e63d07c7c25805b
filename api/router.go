package api

import (
	"fmt"
	"net/http"

	"github.com/flotilla-gitops/flotilla/router"
)

// RouterRoutes gives the routes of every service released through a
// router: the traffic split the swarm runs now. complete is false until
// the controller has worked out the routes of every application since it
// started.
type RouterRoutes interface {
	RouterRoutes() (routes []router.Route, complete bool)
}

// getRouterConfig serves the Traefik HTTP provider's dynamic
// configuration. Until every application's routes are known it answers
// 503, and so on a configuration it cannot render: Traefik then keeps the
// one it has, instead of dropping the routes it was not given.
//
// Under a leader lease only the leader answers with the configuration. A
// standby runs no pass, and a deposed leader's routes are those of a term
// another controller may have moved on since (an aborted canary, a colour
// scaling down): served, they would put traffic back where the leader took
// it away. Both answer 503, so a router polling the controllers through
// one address keeps the leader's last configuration between its answers.
func (s *server) getRouterConfig(w http.ResponseWriter, r *http.Request) error {
	rr, ok := s.ctl.(RouterRoutes)
	if !ok {
		return unsupported("the router configuration", "RouterRoutes")
	}
	if s.opts.Leadership != nil {
		if l := s.opts.Leadership(); !l.Leader {
			e := errorf(http.StatusServiceUnavailable, CodeStandby, "%s", standbyRouterMessage(l))
			e.retryAfter = 1
			return e
		}
	}
	routes, complete := rr.RouterRoutes()
	if !complete {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the router configuration is not decided yet: not every application has been reconciled since the controller started")
	}
	b, err := router.DynamicConfig(routes)
	if err != nil {
		return fmt.Errorf("router configuration: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return nil
	}
	_, err = w.Write(b)
	return err
}

func standbyRouterMessage(l Leadership) string {
	if l.Holder == "" || l.Holder == l.ID {
		return fmt.Sprintf("controller %q stands by and serves no router configuration: no controller holds the leader lease right now (last epoch %d); the leader serves it", l.ID, l.Epoch)
	}
	return fmt.Sprintf("controller %q stands by and serves no router configuration: controller %q leads (epoch %d) and serves it", l.ID, l.Holder, l.Epoch)
}
