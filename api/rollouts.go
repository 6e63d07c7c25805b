package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/flotilla-gitops/flotilla/application"
)

// RolloutCommander hands an operator's command to the rollout of one
// service of an application (see RolloutCommands) and makes it due.
type RolloutCommander interface {
	RolloutCommand(app, service, command string) error
}

// RolloutCommands are the commands POST …/rollout/{command} takes.
var RolloutCommands = []string{"promote", "abort", "pause", "resume", "retry"}

// RolloutBody is the body of POST …/rollout/{command}.
type RolloutBody struct {
	// Service is the service whose rollout the command is for; it may be
	// left out when the application has exactly one.
	Service string `json:"service,omitempty"`
}

func rolloutCommand(c Controller, app, service, command string) error {
	if r, ok := c.(RolloutCommander); ok {
		return r.RolloutCommand(app, service, command)
	}
	return unsupported("rollout commands", "RolloutCommander")
}

// postRollout stores an operator's command for the next pass, which
// decides the rollout with it once.
func (s *server) postRollout(w http.ResponseWriter, r *http.Request) error {
	st, err := s.lookup(r)
	if err != nil {
		return err
	}
	command := r.PathValue("command")
	if !slices.Contains(RolloutCommands, command) {
		return errorf(http.StatusBadRequest, CodeBadRequest, "rollout command %q is not one of %s", command, strings.Join(RolloutCommands, ", "))
	}
	var body RolloutBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	noteAudit(r, "command", command)
	service, err := rolloutService(st, body.Service)
	if err != nil {
		return err
	}
	noteAudit(r, "service", service)
	if err := rolloutCommand(s.ctl, st.Name, service, command); err != nil {
		return fmt.Errorf("rollout %s of %q/%s: %w", command, st.Name, service, err)
	}
	p, _ := principalFrom(r.Context())
	s.log.Info("rollout command requested", "app", st.Name, "service", service, "command", command, "by", p.Name, "role", p.Role)
	writeJSON(w, http.StatusAccepted, OperationResponse{App: st.Name, Phase: Queued, Time: s.now(),
		Message: fmt.Sprintf("%s queued for the rollout of %s; the next pass takes it", command, service)})
	return nil
}

// rolloutService is the service a command is for: the one named, which
// must have a rollout, or the application's only one.
func rolloutService(st application.Status, service string) (string, error) {
	var names []string
	for _, r := range st.Rollouts {
		names = append(names, r.Service)
	}
	switch {
	case service != "" && slices.Contains(names, service):
		return service, nil
	case service != "":
		return "", errorf(http.StatusNotFound, CodeNotFound, "application %s has no rollout of service %q (rollouts: %s)", st.Name, service, listOrNone(names))
	case len(names) == 1:
		return names[0], nil
	case len(names) == 0:
		return "", errorf(http.StatusNotFound, CodeNotFound, "application %s has no rollout", st.Name)
	}
	return "", errorf(http.StatusBadRequest, CodeBadRequest, "application %s has several rollouts (%s): name the service", st.Name, listOrNone(names))
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
