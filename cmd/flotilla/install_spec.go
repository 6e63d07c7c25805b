package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"

	"github.com/flotilla-gitops/flotilla/labels"
)

// The swarm objects `flotilla install` creates carry these labels. The
// install label is what uninstall trusts: it removes only objects bearing it
// with the stack's name, never a secret of the same name made by hand. The
// namespace label makes them a stack to `docker stack ls/ps/rm`.
const (
	labelInstall   = labels.Install
	labelNamespace = labels.Namespace
)

// installPlan is what `flotilla install` puts on the swarm, the same service
// as examples/self/stack/docker-compose.yml: `controller --ha` under the
// stack's name, the applications file and admin token as secrets, the
// manager's socket mounted, rolled start-first with rollback on failure.
type installPlan struct {
	stack       string
	image       string
	replicas    uint64
	publish     int    // 0: the API is not published
	publishMode string // ingress or host
	socket      string // the manager's Docker socket, mounted into the tasks
	lease       time.Duration
	extraArgs   []string
	// networks are overlay networks made by someone else (a router's
	// network, shared with the applications it routes to) that the
	// controller joins besides its own; install never creates or removes
	// them.
	networks []string
}

var stackName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,29}$`)

func (p installPlan) validate() error {
	switch {
	case !stackName.MatchString(p.stack):
		return fmt.Errorf("--stack %q: want a lowercase letter then letters, digits or '-', at most 30", p.stack)
	case p.image == "":
		return fmt.Errorf("--image is required (e.g. flotilla:1.4.0)")
	case p.replicas < 1:
		return fmt.Errorf("--replicas %d: want at least 1", p.replicas)
	case p.publish < 0 || p.publish > 65535:
		return fmt.Errorf("--publish %d: want a port, or 0 for none", p.publish)
	case p.publishMode != string(swarm.PortConfigPublishModeIngress) && p.publishMode != string(swarm.PortConfigPublishModeHost):
		return fmt.Errorf("--publish-mode %q: want ingress or host", p.publishMode)
	case p.socket == "":
		return fmt.Errorf("--docker-socket is required")
	case p.lease < 3*time.Second:
		return fmt.Errorf("--lease-duration %s: want at least 3s", p.lease)
	}
	for i, n := range p.networks {
		switch {
		case n == "":
			return fmt.Errorf("--network: an empty name")
		case n == p.networkName():
			return fmt.Errorf("--network %s: the controller is on its own network already", n)
		case slices.Contains(p.networks[:i], n):
			return fmt.Errorf("--network %s: given twice", n)
		}
	}
	return nil
}

func (p installPlan) serviceName() string { return p.stack + "_controller" }
func (p installPlan) networkName() string { return p.stack + "_default" }

// secretName names a secret by its content: installing again with the same
// file keeps the secret (and the running tasks), a changed file gets a new
// secret and one rolling update. Twelve hex digits of a SHA-256 say nothing
// useful about a token, and the content itself is never printed.
func secretName(stack, kind string, content []byte) string {
	sum := sha256.Sum256(content)
	return stack + "-" + kind + "-" + hex.EncodeToString(sum[:6])
}

func (p installPlan) labels() map[string]string {
	return map[string]string{labelInstall: p.stack, labelNamespace: p.stack}
}

// installSecrets are name → id of the secrets the service mounts; read is
// zero when no read token is installed.
type installSecrets struct{ apps, admin, read [2]string }

// spec is the controller's service, on its own network (networkID, under
// the alias controller) and on the ids of p.networks in extraNets.
func (p installPlan) spec(networkID string, extraNets []string, secrets installSecrets) swarm.ServiceSpec {
	const appsPath, tokenPath, readPath = "flotilla-applications", "flotilla-admin-token", "flotilla-read-token"
	grace := 30 * time.Second // --shutdown-timeout (10s) and the lease's release
	args := append([]string{
		"controller",
		"--ha",
		"--lease-duration=" + p.lease.String(),
		"--controller-id=" + p.stack,
		"--config=/run/secrets/" + appsPath,
		"--listen=:8080",
	}, p.extraArgs...)
	// Start a new task before stopping an old one, so the API keeps
	// answering; a port published on the host cannot be bound twice on a
	// node, so there the old task must stop first.
	order := swarm.UpdateOrderStartFirst
	if p.publish != 0 && p.publishMode == string(swarm.PortConfigPublishModeHost) {
		order = swarm.UpdateOrderStopFirst
	}
	secret := func(nameID [2]string, target string) *swarm.SecretReference {
		return &swarm.SecretReference{SecretName: nameID[0], SecretID: nameID[1],
			File: &swarm.SecretReferenceFileTarget{Name: target, UID: "0", GID: "0", Mode: 0o400}}
	}
	env := []string{
		"FLOTILLA_ADMIN_TOKEN_FILE=/run/secrets/" + tokenPath,
		"FLOTILLA_HA_ID={{.Task.Name}}",
	}
	mounted := []*swarm.SecretReference{secret(secrets.apps, appsPath), secret(secrets.admin, tokenPath)}
	if secrets.read != [2]string{} {
		env = append(env, "FLOTILLA_READ_TOKEN_FILE=/run/secrets/"+readPath)
		mounted = append(mounted, secret(secrets.read, readPath))
	}
	// The alias controller on every network: a router polling
	// http://controller:8080 (or tasks.controller) reaches it on the
	// network it shares with the controller.
	nets := []swarm.NetworkAttachmentConfig{{Target: networkID, Aliases: []string{"controller"}}}
	for _, id := range extraNets {
		nets = append(nets, swarm.NetworkAttachmentConfig{Target: id, Aliases: []string{"controller"}})
	}
	replicas := p.replicas
	s := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: p.serviceName(), Labels: p.labels()},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Image:           p.image,
				Args:            args,
				Labels:          map[string]string{labelNamespace: p.stack},
				Env:             env,
				Mounts:          []mount.Mount{{Type: mount.TypeBind, Source: p.socket, Target: "/var/run/docker.sock"}},
				Secrets:         mounted,
				StopGracePeriod: &grace,
			},
			Placement:     &swarm.Placement{Constraints: []string{"node.role == manager"}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionAny},
			Networks:      nets,
		},
		Mode: swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
		UpdateConfig: &swarm.UpdateConfig{Parallelism: 1, Order: order,
			FailureAction: swarm.UpdateFailureActionRollback, Monitor: 20 * time.Second},
		RollbackConfig: &swarm.UpdateConfig{Parallelism: 1, Order: order},
	}
	if p.publish != 0 {
		s.EndpointSpec = &swarm.EndpointSpec{Ports: []swarm.PortConfig{{
			Protocol: network.TCP, TargetPort: 8080,
			PublishedPort: uint32(p.publish), PublishMode: swarm.PortConfigPublishMode(p.publishMode),
		}}}
	}
	return s
}

// readyURL is where install waits for /readyz when the operator names none:
// the published port on this machine.
func (p installPlan) readyURL() string {
	if p.publish == 0 {
		return ""
	}
	return "http://127.0.0.1:" + strconv.Itoa(p.publish) + "/readyz"
}
