// Package backend is the deploy backend that talks to a real Docker swarm
// through the moby client. It implements charts.Backend and every read,
// list and remove capability in package capability, and it is the only
// package that writes to the swarm.
//
// Three rules shape it. Everything a deploy needs is read, converted and
// checked before its first write, so bad input writes nothing. A service is
// written only when its desired spec changed (a hash label remembers the
// spec it was last written with), so a steady-state pass writes nothing.
// Every service write carries the version it was read at, so a concurrent
// writer is noticed instead of overwritten.
package backend

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/labels"
	"github.com/flotilla-gitops/flotilla/regauth"
)

// Label keys Flotilla writes. Docker's own stack labels are used as the
// docker CLI uses them, so stacks stay manageable with `docker stack`.
const (
	// LabelNamespace scopes services, networks, configs and secrets to a
	// stack, as `docker stack deploy` does.
	LabelNamespace = labels.Namespace
	// LabelImage records the image reference the stack file asked for,
	// before any digest was pinned.
	LabelImage = labels.Image
	// LabelSpecHash is the sha256 of the desired spec a service was last
	// written with, before Flotilla's own labels and with sealed env values
	// as their placeholders; comparing it is how an unchanged service is
	// left without a write.
	LabelSpecHash = labels.SpecHash

	// Release record labels. Records carry no namespace label, so neither
	// `docker stack rm` nor a sweep ever takes history with a stack.
	LabelRecord   = labels.Record
	LabelRelease  = labels.Release
	LabelRevision = labels.Revision
	LabelOwner    = labels.Owner
	LabelCommit   = labels.Commit
)

// ResolveImage says when a service's image tag is pinned to a digest.
type ResolveImage string

const (
	// ResolveNever writes the image reference as the manifest has it.
	ResolveNever ResolveImage = "never"
	// ResolveChanged asks the registry for a tag's digest only when the
	// reference in the manifest differs from the one the service was last
	// deployed with, and falls back to the tag when the registry does not
	// answer in time. An unchanged tag keeps the digest it was pinned to.
	ResolveChanged ResolveImage = "changed"
)

// Options configure New.
type Options struct {
	// Host is the daemon's address (unix:///var/run/docker.sock,
	// tcp://host:2376, ...). Empty takes DOCKER_HOST, DOCKER_CERT_PATH,
	// DOCKER_TLS_VERIFY and DOCKER_API_VERSION from the environment, as the
	// docker CLI does.
	Host string
	// Transport carries every request to Host; the backend's counting,
	// gate and deadline wrap it. Nil dials Host itself (with the
	// environment's TLS settings when Host is empty). A transport that
	// speaks TLS itself is given a plain http scheme.
	Transport http.RoundTripper
	// APIVersion pins the engine API version requests are sent with. Empty
	// negotiates it with the daemon on the first request.
	APIVersion string
	// Logger receives the backend's logs, with component=backend. Nil
	// uses slog.Default().
	Logger *slog.Logger
	// ResolveImage is ResolveNever (default) or ResolveChanged.
	ResolveImage ResolveImage
	// OnRequest, when set, is told the operation of every request sent to
	// the daemon ("service.update", ...), for metrics. It must not block.
	OnRequest func(operation string)
	// ResolveTimeout bounds one registry digest lookup. Default 5s.
	ResolveTimeout time.Duration
	// RequestTimeout bounds every request to the daemon, from sending it
	// to reading the last byte of its answer; a daemon that stalls makes
	// the read or write that asked fail with an error within it. Streaming
	// calls (events, logs) are exempt. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// FieldsAPIVersion, when set, is the engine API version whose fields a
	// deploy keeps and live drift expects, instead of the negotiated one.
	// Only tests set it, newer than the daemon, so that the daemon itself
	// drops a field written to it: that is how the reconciler's check for a
	// write that did not stick is exercised against a real daemon.
	FieldsAPIVersion string
	// Gate, when set, is asked before every request that may change the
	// swarm; see WriteGate. Nil writes whenever asked.
	Gate WriteGate
}

// DefaultRequestTimeout is Options.RequestTimeout's default: far longer than
// any single request to a healthy daemon takes, even a listing of a large
// swarm, and short enough that a stalled one is reported within a pass.
const DefaultRequestTimeout = 30 * time.Second

// Backend deploys to and reads from one swarm. Methods are safe for
// concurrent use. The With… methods return per-application copies that
// share the client and the request counter; what they set (allowlist,
// forbidden names, registry credential, out-of-band notifier) is enforced
// where specs are written, so it holds for every write that copy makes.
type Backend struct {
	api     *client.Client
	counter *counter
	log     *slog.Logger

	resolve        ResolveImage
	resolveTimeout time.Duration
	fieldsVersion  string // Options.FieldsAPIVersion
	gate           WriteGate

	// Per-application settings, set on copies.
	outOfBand func(service string)
	// allow and forbidden feed the guards (guard.go); the zero values are
	// the strictest rules, so a copy nobody configured allows nothing
	// outside its stacks.
	allow     application.Allow
	forbidden map[string]struct{}
	// regAuth gives each service write its registry credential
	// (regauth.go); nil sends none.
	regAuth regauth.Resolver

	// self is the controller's own service and stack, never removed.
	self Self

	// nodes names task nodes by hostname across reads; shared by copies.
	nodes *nodeNames

	// hooks lets tests step into a deploy; nil in production.
	hooks *testHooks
}

// testHooks are called at points a test cannot otherwise reach, such as
// between a service's read and its compare-and-swap write.
type testHooks struct {
	beforeServiceUpdate func(ctx context.Context, id string, attempt int)
	beforeServiceCreate func(ctx context.Context, name string)
}

// New returns a Backend. It does not contact the daemon: a swarm that is
// down when the controller starts is reported by the first read instead.
func New(_ context.Context, opts Options) (*Backend, error) {
	switch opts.ResolveImage {
	case "":
		opts.ResolveImage = ResolveNever
	case ResolveNever, ResolveChanged:
	default:
		return nil, fmt.Errorf("backend: resolve image %q: want %q or %q", opts.ResolveImage, ResolveNever, ResolveChanged)
	}
	if opts.ResolveTimeout <= 0 {
		opts.ResolveTimeout = 5 * time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}

	cnt := newCounter()
	cnt.onRequest = opts.OnRequest
	cnt.gate = opts.Gate
	api, err := countingClient(opts, cnt)
	if err != nil {
		return nil, fmt.Errorf("backend: docker client: %w", err)
	}
	return &Backend{
		api:            api,
		counter:        cnt,
		gate:           opts.Gate,
		log:            logger.With("component", "backend"),
		resolve:        opts.ResolveImage,
		resolveTimeout: opts.ResolveTimeout,
		fieldsVersion:  opts.FieldsAPIVersion,
		nodes:          newNodeNames(),
	}, nil
}

// Stats returns the requests sent so far by this backend and every copy of
// it.
func (b *Backend) Stats() Stats { return b.counter.snapshot() }

// Client returns the counting client the backend talks through.
func (b *Backend) Client() *client.Client { return b.api }

// clone is the per-application copy every With… method starts from: it
// shares the client, counter and logger, and owns its settings.
func (b *Backend) clone() *Backend {
	c := *b
	return &c
}

// WithOutOfBandNotifier returns a copy of b that calls fn with the scoped
// service name each time a service write loses its compare-and-swap to
// another writer. The write is retried from a fresh read, up to
// maxCASAttempts writes in all.
func (b *Backend) WithOutOfBandNotifier(fn func(service string)) charts.Backend {
	c := b.clone()
	c.outOfBand = fn
	return c
}

// isOutOfSequence reports whether a write was refused because the version it
// carried is no longer the object's current one. The daemon sends this as an
// rpc error of unknown kind, so its message is all there is to match.
func isOutOfSequence(err error) bool {
	return err != nil && strings.Contains(err.Error(), "update out of sequence")
}

// isNotFound reports whether err says the object does not exist.
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
