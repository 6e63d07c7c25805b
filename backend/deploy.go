package backend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/drift"
	"github.com/flotilla-gitops/flotilla/fault"
)

// maxCASAttempts bounds how often one service write is tried when another
// writer keeps moving its version.
const maxCASAttempts = 3

// pendingPrefix marks the id of a config or secret this deploy is about to
// create: conversion needs an id for every reference before anything is
// written, and the real id is only known after the create.
const pendingPrefix = "flotilla-pending:"

// nodeLocalNetworks are the networks every node has of its own. They are
// local in scope by nature, and a task attaches to the one on whatever node
// runs it, so the scope check a user-defined external network needs does not
// apply to them (as with `docker stack deploy`).
var nodeLocalNetworks = map[string]bool{"host": true, "bridge": true}

// deployPlan is everything a deploy decided before its first write.
type deployPlan struct {
	stack    *compose.Stack
	networks []string // scoped names to create
	configs  []string // names to create
	secrets  []string // names to create
	services []string // scoped names, sorted
	live     map[string]swarm.Service
	heal     map[string]bool
	auth     map[string]string // scoped service name -> X-Registry-Auth
	// sealedEnv is, for each service with sealed values, its env as the
	// manifest holds it (placeholders): what the spec hash is taken over.
	sealedEnv map[string][]string
	// netNames names, by id, the manifest's networks the swarm already
	// has; apply adds those it creates (charts.DeployResult.Networks).
	netNames map[string]string
}

// DeployStack converges req.Stack to req.Manifest. It reads, converts and
// checks everything first, so invalid input or a missing external object
// writes nothing; then it creates missing networks, configs and secrets, and
// creates or updates the services whose desired spec changed. It never
// removes anything. On an error after the first write, the result says what
// was written.
func (b *Backend) DeployStack(ctx context.Context, req charts.DeployRequest) (charts.DeployResult, error) {
	var res charts.DeployResult
	if req.Stack == "" {
		return res, errors.New("deploy: empty stack name")
	}
	ctx, epoch, err := b.permitWrites(ctx)
	if err != nil {
		return res, fmt.Errorf("deploy stack %s: %w", req.Stack, err)
	}
	req.Labels = withEpochLabel(req.Labels, epoch)
	p, err := b.plan(ctx, req)
	if err != nil {
		return res, fmt.Errorf("deploy stack %s: %w", req.Stack, err)
	}
	res, err = b.apply(ctx, req, p)
	if err != nil && missingObject(err) {
		// A network, config or secret the plan saw was gone by the time a
		// service named it (removed behind the controller's back, as by a
		// concurrent `docker stack rm`). Planning again reads the swarm
		// afresh and recreates what is missing, as the first deploy did;
		// once only, so a daemon that keeps saying so fails the pass.
		b.log.Warn("a declared object was not found while writing; planning again to recreate it", "stack", req.Stack, "error", err)
		first := res
		if p, err = b.plan(ctx, req); err != nil {
			return first, fmt.Errorf("deploy stack %s: re-plan after an object was not found: %w", req.Stack, err)
		}
		res, err = b.apply(ctx, req, p)
		res.Writes += first.Writes
		res.Created = slices.Concat(first.Created, res.Created)
		res.Updated = slices.Concat(first.Updated, res.Updated)
		res.Unchanged = slices.DeleteFunc(res.Unchanged, func(s string) bool {
			return slices.Contains(first.Created, s) || slices.Contains(first.Updated, s)
		})
	}
	if err != nil {
		return res, fmt.Errorf("deploy stack %s: %w", req.Stack, err)
	}
	return res, nil
}

// plan reads the swarm and converts the manifest without writing.
func (b *Backend) plan(ctx context.Context, req charts.DeployRequest) (*deployPlan, error) {
	// One conversion serves the deploy, the caller's when it made one:
	// what the manifest declares now, the specs with the swarm's ids once
	// they are read.
	conv := req.Conversion
	if !conv.Of(req.Manifest, req.Stack) {
		var err error
		if conv, err = compose.Prepare(ctx, req.Manifest, req.Stack); err != nil {
			return nil, fmt.Errorf("convert manifest: %w", err)
		}
	}
	decl, err := conv.Stack(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("convert manifest: %w", err)
	}

	// The four reads are independent: made at once, a deploy waits for the
	// slowest rather than for their sum.
	b.negotiate(ctx)
	var (
		nets                   []listedNetwork
		configObjs, secretObjs map[string]listedObject
		services               []swarm.Service
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		nets, err = b.declaredNetworks(gctx, decl)
		return err
	})
	g.Go(func() (err error) {
		configObjs, err = b.configsNamed(gctx, append(slices.Collect(maps.Keys(decl.Configs)), decl.ExternalConfigs...))
		return err
	})
	g.Go(func() (err error) {
		secretObjs, err = b.secretsNamed(gctx, append(slices.Collect(maps.Keys(decl.Secrets)), decl.ExternalSecrets...))
		return err
	})
	g.Go(func() (err error) {
		list, err := b.api.ServiceList(gctx, client.ServiceListOptions{Filters: namespace(req.Stack)})
		if err != nil {
			return fmt.Errorf("list services: %w", err)
		}
		services = list.Items
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	liveNets := make(map[string]listedNetwork, len(nets))
	stale := map[string]bool{}
	for _, n := range nets {
		if staleOnNode(n) {
			stale[n.Name] = true
			continue
		}
		liveNets[n.Name] = n
		liveNets[n.ID] = n
	}

	p := &deployPlan{live: make(map[string]swarm.Service, len(services)), heal: make(map[string]bool), netNames: make(map[string]string, len(nets))}
	for _, n := range nets {
		if !stale[n.Name] {
			p.netNames[n.ID] = n.Name
		}
	}
	for _, s := range services {
		p.live[s.Spec.Name] = s
	}
	for _, h := range req.Heal {
		p.heal[h] = true
	}
	// Guards first: a refused stack learns nothing more about the swarm
	// from this deploy than that it was refused.
	existing, err := b.readExisting(ctx, req.Stack, req.Labels[LabelOwner], decl, liveNets, configObjs, secretObjs)
	if err != nil {
		return nil, err
	}
	if err := b.guard(req, decl, p.live, existing); err != nil {
		return nil, err
	}
	liveConfigs, liveSecrets := idsOf(configObjs), idsOf(secretObjs)

	var problems []error
	for _, name := range decl.ExternalNetworks {
		n, ok := liveNets[name]
		switch {
		case nodeLocalNetworks[name]:
			// Every node has its own; the guard decided whether it may be used.
		// Swarm refuses the next two, but only when it reaches the service
		// that attaches, after the stack's other objects were written.
		case name == "none":
			problems = append(problems, &fault.Error{Field: "networks", Err: fmt.Errorf(
				"external network %q cannot be attached to a swarm service: Swarm has no such network", name)})
		case ok && n.Ingress:
			problems = append(problems, &fault.Error{Field: "networks", Err: fmt.Errorf(
				"external network %q is the swarm's ingress network, which Swarm attaches by itself to a service publishing a port in ingress mode and never explicitly", name)})
		case !ok:
			problems = append(problems, fmt.Errorf("external network %q does not exist", name))
		case n.Scope != "swarm":
			problems = append(problems, fmt.Errorf("external network %q has scope %q, a stack needs %q", name, n.Scope, "swarm"))
		}
	}
	for _, name := range decl.ExternalConfigs {
		if _, ok := liveConfigs[name]; !ok {
			problems = append(problems, fmt.Errorf("external config %q does not exist", name))
		}
	}
	for _, name := range decl.ExternalSecrets {
		if _, ok := liveSecrets[name]; !ok {
			problems = append(problems, fmt.Errorf("external secret %q does not exist", name))
		}
	}
	for _, name := range sortedKeys(decl.Networks) {
		if _, ok := liveNets[name]; ok {
			continue
		}
		if stale[name] {
			problems = append(problems, &StaleNetworkError{Network: name})
			continue
		}
		p.networks = append(p.networks, name)
	}
	for _, name := range sortedKeys(decl.Configs) {
		if _, ok := liveConfigs[name]; !ok {
			p.configs = append(p.configs, name)
			liveConfigs[name] = pendingPrefix + name
		}
	}
	for _, name := range sortedKeys(decl.Secrets) {
		if _, ok := liveSecrets[name]; ok {
			continue
		}
		if _, ok := req.Secrets[name]; !ok && decl.Secrets[name].Driver == nil {
			// Names carry a hash of the content, so a secret that is neither
			// on the swarm nor given in plaintext cannot be created.
			problems = append(problems, fmt.Errorf("secret %q is not on the swarm and its plaintext was not supplied", name))
			continue
		}
		p.secrets = append(p.secrets, name)
		liveSecrets[name] = pendingPrefix + name
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}

	p.stack, err = conv.Stack(ctx, mapResolver{configs: liveConfigs, secrets: liveSecrets})
	if err != nil {
		return nil, fmt.Errorf("convert manifest: %w", err)
	}
	version := b.fieldsAPIVersion(ctx)
	for _, w := range p.stack.ForAPIVersion(version) {
		b.log.Warn("deploying without a field this daemon does not keep", "stack", req.Stack, "api_version", version, "warning", w)
	}
	for name, spec := range p.stack.Services {
		if cs := spec.TaskTemplate.ContainerSpec; cs != nil && compose.SealedEnv(cs.Env) != nil {
			if p.sealedEnv == nil {
				p.sealedEnv = map[string][]string{}
			}
			p.sealedEnv[name] = cs.Env
		}
	}
	if err := compose.Unseal(p.stack, req.Sealed); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	p.services = sortedKeys(p.stack.Services)
	if p.auth, err = b.registryAuths(ctx, p.stack.Services); err != nil {
		return nil, err
	}
	return p, nil
}

// negotiate settles the API version the client speaks before requests go
// out side by side. The client negotiates on its first request, and two
// first requests at once would both write the version each of them reads.
func (b *Backend) negotiate(ctx context.Context) {
	if b.counter.negotiated.Load() {
		return
	}
	b.counter.negotiating.Lock()
	defer b.counter.negotiating.Unlock()
	if !b.counter.negotiated.Load() {
		// A failed ping leaves the client at its newest version; the next
		// request negotiates again.
		if _, err := b.api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err == nil {
			b.log.Info("engine API version settled", "version", b.api.ClientVersion(), "host", b.api.DaemonHost())
		}
	}
}

// apiVersion is the engine API version the client speaks with the daemon,
// negotiated first if no ping has been answered yet: before that the client
// reports its own newest version, which would keep fields the daemon drops.
func (b *Backend) apiVersion(ctx context.Context) string {
	b.negotiate(ctx)
	return b.api.ClientVersion()
}

// fieldsAPIVersion is the version whose fields specs are cut to: the
// negotiated one unless Options.FieldsAPIVersion says otherwise.
func (b *Backend) fieldsAPIVersion(ctx context.Context) string {
	if b.fieldsVersion != "" {
		return b.fieldsVersion
	}
	return b.apiVersion(ctx)
}

// missingObjectText matches the daemon's words for a service write naming a
// network, config or secret that does not exist: a 500 for a network and an
// InvalidArgument for the other two, so neither is a typed not-found.
var missingObjectText = regexp.MustCompile(`(?i)\b(network \S+ not found|config not found|secret not found)\b`)

// missingObject reports whether err says a write named a network, config or
// secret that is not on the swarm.
func missingObject(err error) bool {
	return isNotFound(err) || missingObjectText.MatchString(err.Error())
}

// staleOnNode reports whether a swarm-scoped network in a listing is only the
// node's own leftover copy of a network Swarm no longer knows. A listing
// shows the manager's networks first, as the manager describes them, without
// peers or endpoints, and adds the node's local networks it has not listed;
// a swarm-scoped one among those is a network removed while a container
// (typically a job's, which can outlive its service) still held it. Swarm
// then answers "network … not found" for it, and refuses to create another
// under its name.
func staleOnNode(n listedNetwork) bool {
	return n.Scope == "swarm" && !n.Ingress && (n.Containers != nil || len(n.Peers) > 0)
}

// StaleNetworkError is a declared network the node still lists but Swarm no
// longer knows. Nothing can be written on it or in its name until the node
// lets go of it, so a deploy that needs it writes nothing and says why.
type StaleNetworkError struct {
	Network string
}

func (e *StaleNetworkError) Error() string {
	return fmt.Sprintf("network %q is a stale leftover on this node: Swarm no longer knows it (it was removed while a container, "+
		"typically a job's that outlived its service, still held it), so services cannot use it and it cannot be recreated "+
		"under its name until the node drops it (check `docker network inspect %s` for containers still attached)", e.Network, e.Network)
}

// writeConcurrency bounds the writes one deploy has in flight at once. The
// daemon commits each through its raft log, and several in flight let it
// batch them; more than a handful only queue behind each other there and
// crowd out other clients of the same manager.
const writeConcurrency = 8

// apply performs the writes plan decided on, in dependency order: every
// network, config and secret first, then the services that name them. The
// objects of one kind do not depend on each other, so they are written
// concurrently, writeConcurrency at a time. After the first failure no
// further write is started; those already in flight finish, and the result
// lists every write that succeeded, so a partial deploy is reported as one.
func (b *Backend) apply(ctx context.Context, req charts.DeployRequest, p *deployPlan) (charts.DeployResult, error) {
	var res charts.DeployResult
	log := b.log.With("stack", req.Stack)

	created, n, err := b.createResources(ctx, log, req, p)
	res.Writes += n
	res.Networks = p.netNames
	outcomes := make([]serviceOutcome, len(p.services))
	if err == nil {
		err = bounded(len(p.services), func(i int) error {
			outcomes[i] = b.writeService(ctx, log, req, p, p.services[i], created)
			return outcomes[i].err
		})
	}
	for i, o := range outcomes {
		short := unscoped(req.Stack, p.services[i])
		switch o.action {
		case serviceCreated:
			res.Writes++
			res.Created = append(res.Created, short)
		case serviceUpdated:
			res.Writes++
			res.Updated = append(res.Updated, short)
		case serviceUnchanged:
			res.Unchanged = append(res.Unchanged, short)
		}
	}
	if err != nil && res.Writes > 0 {
		err = fmt.Errorf("%w (the deploy stopped part-way: %d objects were written, %d services created and %d updated)",
			err, res.Writes, len(res.Created), len(res.Updated))
	}
	return res, err
}

// createResources creates the networks, configs and secrets plan found
// missing, concurrently. It returns the real id of each config and secret by
// its pending id, and how many creates succeeded.
func (b *Backend) createResources(ctx context.Context, log *slog.Logger, req charts.DeployRequest, p *deployPlan) (map[string]string, int, error) {
	type create struct {
		kind, name string
		do         func() (string, error) // returns the new id
	}
	var todo []create
	for _, name := range p.networks {
		todo = append(todo, create{"network", name, func() (string, error) {
			opts := p.stack.Networks[name]
			opts.Labels = ownerStamped(opts.Labels, req.Labels)
			r, err := b.api.NetworkCreate(ctx, name, opts)
			return r.ID, err
		}})
	}
	for _, name := range p.configs {
		todo = append(todo, create{"config", name, func() (string, error) {
			spec := p.stack.Configs[name]
			spec.Labels = ownerStamped(spec.Labels, req.Labels)
			r, err := b.api.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: spec})
			return r.ID, err
		}})
	}
	for _, name := range p.secrets {
		todo = append(todo, create{"secret", name, func() (string, error) {
			spec := p.stack.Secrets[name]
			spec.Data = req.Secrets[name]
			spec.Labels = ownerStamped(spec.Labels, req.Labels)
			r, err := b.api.SecretCreate(ctx, client.SecretCreateOptions{Spec: spec})
			return r.ID, err
		}})
	}
	ids := make([]string, len(todo))
	done := make([]bool, len(todo))
	err := bounded(len(todo), func(i int) error {
		c := todo[i]
		id, err := c.do()
		if err != nil {
			return fmt.Errorf("create %s %s: %w", c.kind, c.name, err)
		}
		ids[i], done[i] = id, true
		log.Info("created "+c.kind, c.kind, c.name)
		return nil
	})
	created := make(map[string]string) // pending id -> real id
	n := 0
	for i, c := range todo {
		if !done[i] {
			continue
		}
		n++
		if c.kind == "network" {
			p.netNames[ids[i]] = c.name
		} else {
			created[pendingPrefix+c.name] = ids[i]
		}
	}
	return created, n, err
}

// serviceAction is what one service's write did.
type serviceAction int

const (
	serviceNotWritten serviceAction = iota // failed, or never started
	serviceCreated
	serviceUpdated
	serviceUnchanged
)

type serviceOutcome struct {
	action serviceAction
	err    error
}

// writeService creates, updates or leaves alone one scoped service.
func (b *Backend) writeService(ctx context.Context, log *slog.Logger, req charts.DeployRequest, p *deployPlan, name string, created map[string]string) serviceOutcome {
	short := unscoped(req.Stack, name)
	desired := p.stack.Services[name]
	if err := resolvePending(&desired, created); err != nil {
		return serviceOutcome{err: fmt.Errorf("service %s: %w", short, err)}
	}
	labels := make(map[string]string, len(desired.Labels)+1)
	maps.Copy(labels, desired.Labels)
	desired.Labels = labels
	if _, ok := desired.Labels[LabelImage]; !ok && desired.TaskTemplate.ContainerSpec != nil {
		desired.Labels[LabelImage] = desired.TaskTemplate.ContainerSpec.Image
	}
	hash, err := specHash(hashedSpec(desired, p.sealedEnv[name]))
	if err != nil {
		return serviceOutcome{err: fmt.Errorf("service %s: %w", short, err)}
	}

	live, exists := p.live[name]
	switch {
	case !exists:
		if b.hooks != nil && b.hooks.beforeServiceCreate != nil {
			b.hooks.beforeServiceCreate(ctx, name)
		}
		if err := b.createService(ctx, desired, req.Labels, hash, p.auth[name]); err != nil {
			return serviceOutcome{err: fmt.Errorf("create service %s: %w", short, err)}
		}
		log.Info("created service", "service", short)
		return serviceOutcome{action: serviceCreated}
	case live.Spec.Labels[LabelSpecHash] == hash && !p.heal[name]:
		return serviceOutcome{action: serviceUnchanged}
	default:
		if err := b.updateService(ctx, log.With("service", short), live, desired, req.Labels, hash, p.auth[name]); err != nil {
			return serviceOutcome{err: fmt.Errorf("update service %s: %w", short, err)}
		}
		log.Info("updated service", "service", short, "heal", p.heal[name])
		return serviceOutcome{action: serviceUpdated}
	}
}

// bounded calls fn(0) … fn(n-1), writeConcurrency at a time, and returns
// the errors they returned, joined. Once one has failed no further call is
// started, so a failing daemon is not sent the rest of a deploy; calls
// already running are waited for, never cancelled, since a write cut off
// mid-way leaves the swarm in a state nobody recorded.
func bounded(n int, fn func(i int) error) error {
	if n == 0 {
		return nil
	}
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
	)
	errs := make([]error, n) // by call, so the joined error reads in order
	sem := make(chan struct{}, writeConcurrency)
	for i := range n {
		sem <- struct{}{}
		if failed.Load() {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				failed.Store(true)
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createService writes a new service. auth is its registry credential,
// "" for none.
func (b *Backend) createService(ctx context.Context, desired swarm.ServiceSpec, labels map[string]string, hash, auth string) error {
	spec := withLabels(desired, labels, hash)
	if b.resolve == ResolveChanged {
		b.pinDigest(ctx, &spec, auth)
	}
	r, err := b.api.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec, EncodedRegistryAuth: auth, QueryRegistry: false})
	if err != nil {
		return err
	}
	b.warn(spec.Name, r.Warnings)
	return nil
}

// updateService writes desired over live with compare-and-swap on the
// version it read. A write refused because the version moved is counted and
// retried from a fresh read, at most maxCASAttempts writes in all. The
// out-of-band notifier hears of it when the fresh read shows another writer
// changed the spec (or when the backend gives up); a version moved by the
// swarm's own bookkeeping, as right after a create, is not news.
func (b *Backend) updateService(ctx context.Context, log *slog.Logger, live swarm.Service, desired swarm.ServiceSpec, labels map[string]string, hash, auth string) error {
	for attempt := 1; ; attempt++ {
		spec := b.updateSpec(ctx, live, desired, labels, hash, auth)
		if b.hooks != nil && b.hooks.beforeServiceUpdate != nil {
			b.hooks.beforeServiceUpdate(ctx, live.ID, attempt)
		}
		r, err := b.api.ServiceUpdate(ctx, live.ID, client.ServiceUpdateOptions{Version: live.Version, Spec: spec, EncodedRegistryAuth: auth, QueryRegistry: false})
		if err == nil {
			b.warn(spec.Name, r.Warnings)
			return nil
		}
		if !isOutOfSequence(err) {
			return err
		}
		b.counter.conflict()
		if attempt >= maxCASAttempts {
			b.notifyOutOfBand(desired.Name)
			return fmt.Errorf("gave up after %d writes refused as out of date: %w", attempt, err)
		}
		fresh, err := b.api.ServiceInspect(ctx, live.ID, client.ServiceInspectOptions{})
		if err != nil {
			return fmt.Errorf("re-read after a refused write: %w", err)
		}
		if reflect.DeepEqual(fresh.Service.Spec, live.Spec) {
			log.Debug("service version moved without a spec change; retrying", "attempt", attempt)
		} else {
			log.Warn("another writer changed the service first; retrying from a fresh read", "attempt", attempt)
			b.notifyOutOfBand(desired.Name)
		}
		live = fresh.Service
	}
}

func (b *Backend) notifyOutOfBand(service string) {
	if b.outOfBand != nil {
		b.outOfBand(service)
	}
}

// updateSpec is the spec written over live: desired plus the deploy's
// labels, keeping what `docker stack deploy` keeps so that an update does
// not restart tasks for nothing.
func (b *Backend) updateSpec(ctx context.Context, live swarm.Service, desired swarm.ServiceSpec, labels map[string]string, hash, auth string) swarm.ServiceSpec {
	spec := withLabels(desired, labels, hash)
	// ForceUpdate is a counter someone bumped to force a restart; writing
	// the manifest's zero back would count as a change and restart again.
	spec.TaskTemplate.ForceUpdate = live.Spec.TaskTemplate.ForceUpdate

	cs, lcs := spec.TaskTemplate.ContainerSpec, live.Spec.TaskTemplate.ContainerSpec
	if cs == nil || lcs == nil {
		return spec
	}
	if live.Spec.Labels[LabelImage] == desired.Labels[LabelImage] && drift.SameImage(cs.Image, lcs.Image) {
		// The reference in git did not change and the live image is that
		// reference (perhaps pinned to a digest): keep it, so a tag and its
		// digest are not mistaken for a new image. The label alone is not
		// enough: `docker service update --image` leaves it behind, and
		// keeping that image would make self-heal write the drift back.
		c := *cs
		c.Image = lcs.Image
		spec.TaskTemplate.ContainerSpec = &c
	} else if b.resolve == ResolveChanged {
		b.pinDigest(ctx, &spec, auth)
	}
	return spec
}

// withLabels returns desired with the deploy's labels and the spec hash on
// the service, never in the task template: a change there would restart
// every task for a change that is only bookkeeping.
func withLabels(desired swarm.ServiceSpec, labels map[string]string, hash string) swarm.ServiceSpec {
	spec := desired
	l := make(map[string]string, len(desired.Labels)+len(labels)+1)
	maps.Copy(l, desired.Labels)
	maps.Copy(l, labels)
	l[LabelSpecHash] = hash
	spec.Labels = l
	return spec
}

// pinDigest replaces the image tag with tag@digest when the registry
// answers within the resolve timeout, and leaves the tag otherwise. auth is
// the service's registry credential, so a private image resolves too.
func (b *Backend) pinDigest(ctx context.Context, spec *swarm.ServiceSpec, auth string) {
	cs := spec.TaskTemplate.ContainerSpec
	if cs == nil {
		return
	}
	named, err := reference.ParseNormalizedNamed(cs.Image)
	if err != nil {
		return
	}
	if _, ok := named.(reference.Canonical); ok {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, b.resolveTimeout)
	defer cancel()
	di, err := b.api.DistributionInspect(rctx, cs.Image, client.DistributionInspectOptions{EncodedRegistryAuth: auth})
	if err != nil {
		b.log.Info("image digest not resolved; deploying the tag", "service", spec.Name, "image", cs.Image, "error", err)
		return
	}
	pinned, err := reference.WithDigest(reference.TagNameOnly(named), di.Descriptor.Digest)
	if err != nil {
		return
	}
	c := *cs
	c.Image = reference.FamiliarString(pinned)
	spec.TaskTemplate.ContainerSpec = &c
}

func (b *Backend) warn(service string, warnings []string) {
	for _, w := range warnings {
		b.log.Warn("daemon warning", "service", service, "warning", w)
	}
}

// specHash is the hex sha256 of the spec's JSON encoding. encoding/json
// writes struct fields in declaration order and map keys sorted, so equal
// specs hash equal.
func specHash(spec swarm.ServiceSpec) (string, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("hash spec: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// hashedSpec is what the spec hash of desired is taken over: desired with
// its env as the manifest holds it when it had sealed values. The hash is a
// label anyone who can read the service sees, and a plain hash over a
// decrypted value could be tested against guesses; a placeholder is a keyed
// digest of its value, so the hash still changes when the value does.
func hashedSpec(desired swarm.ServiceSpec, sealedEnv []string) swarm.ServiceSpec {
	if sealedEnv == nil || desired.TaskTemplate.ContainerSpec == nil {
		return desired
	}
	c := *desired.TaskTemplate.ContainerSpec
	c.Env = sealedEnv
	desired.TaskTemplate.ContainerSpec = &c
	return desired
}

// declaredNetworks lists the networks a plan reads: those the stack
// declares, which it creates or whose labels the guards check, and the
// external ones it attaches to. It asks the daemon for just those names
// rather than for the swarm's every network, which on a shared swarm is
// mostly other stacks' and was read in full on every deploy. The daemon's
// name filter also matches other names (it is a pattern, and the swarm's
// matches prefixes), so only exact names are kept. An external network
// found by no name may be named by its id, as an unfiltered listing would
// have found it: those few are asked for by id.
func (b *Backend) declaredNetworks(ctx context.Context, decl *compose.Stack) ([]listedNetwork, error) {
	names := slices.Concat(slices.Collect(maps.Keys(decl.Networks)), decl.ExternalNetworks)
	if len(names) == 0 {
		return nil, nil
	}
	want := setOf(names)
	list, err := b.listNetworks(ctx, nameFilter(names))
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	out := slices.DeleteFunc(list, func(n listedNetwork) bool { return !want[n.Name] })
	var ids []string
	for _, name := range decl.ExternalNetworks {
		if !slices.ContainsFunc(out, func(n listedNetwork) bool { return n.Name == name }) && !nodeLocalNetworks[name] && name != "none" {
			ids = append(ids, name)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	f := make(client.Filters)
	for _, id := range ids {
		f.Add("id", id)
	}
	byID, err := b.listNetworks(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	wantID := setOf(ids)
	for _, n := range byID {
		if wantID[n.ID] {
			out = append(out, n)
		}
	}
	return out, nil
}
