package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/renderbox"
	"github.com/flotilla-gitops/flotilla/source"
)

// Options are what `flotilla controller` is told on its command line; each
// field is the flag of the same name, documented there.
type Options struct {
	Config       string
	ConfigRepo   ConfigRepoOptions
	DataDir      string
	ControllerID string
	LogFormat    string
	LogLevel     string
	Once         bool
	Prune        bool
	MemoryLimit  MemoryLimit

	SOPSKeyFile     string
	SSHConfig       string
	RenderLimits    compose.Limits
	RenderInProcess bool
	RenderBox       renderbox.Limits
	Listen          string
	InsecureNoAuth  bool
	TokensFile      string
	SSO             SSOOptions
	PublicMetrics   bool
	TLSCert         string
	TLSKey          string
	UI              bool
	MCP             api.MCPOptions

	// Deadlines of the external calls.
	GitTimeout      time.Duration
	GitFetchTimeout time.Duration
	GitTreeBudget   source.TreeBudget
	DockerTimeout   time.Duration
	NotifyTimeout   time.Duration

	// ConsoleURL is the controller's public base URL, for the links of
	// forge feedback.
	ConsoleURL string

	// Bounds of the scheduler.
	SwarmReadTimeout   time.Duration
	OrphanSweepTimeout time.Duration
	QueueLimit         int
	MaxPasses          int

	ShutdownTimeout time.Duration
	HTTP            HTTPTimeouts

	// RegistryPlainHTTP lists the registries (host:port) image automation
	// speaks plain HTTP to besides loopback ones.
	RegistryPlainHTTP []string

	// A highly available pair (leading.go).
	HA            bool
	HAID          string
	LeaseDuration time.Duration

	// Version is the binary's, for the build-info metric and MCP.
	Version string
	// PlanComment makes, for a controller, the markdown plan a pull
	// request comment carries. It is the format of `flotilla plan
	// --format markdown`, which the command owns, so a comment reads the
	// same from the CLI and from the controller. Nil posts no plan.
	PlanComment func(*reconcile.Controller) func(ctx context.Context, app, commit string, deployed bool) (string, error)
}

// HTTPTimeouts bound the API server's connections; see the flags.
type HTTPTimeouts struct {
	Read, Write, Idle time.Duration
}

// UsageError marks options the controller refuses, so the command can
// exit with its status for bad flags rather than for a failed run.
type UsageError struct{ Err error }

func (u UsageError) Error() string { return u.Err.Error() }
func (u UsageError) Unwrap() error { return u.Err }

// ErrFailed means the controller stopped on a failure it has already
// reported (to stderr, stdout or the log): the command exits with its
// failure status and prints nothing more.
var ErrFailed = errors.New("controller failed")

// validate checks the controller flags that need more than their type.
func (o *Options) validate() error {
	if o.ShutdownTimeout <= 0 {
		return UsageError{fmt.Errorf("--shutdown-timeout must be positive, not %s", o.ShutdownTimeout)}
	}
	for name, d := range map[string]time.Duration{
		"--http-read-timeout": o.HTTP.Read, "--http-write-timeout": o.HTTP.Write, "--http-idle-timeout": o.HTTP.Idle,
	} {
		if d < 0 {
			return UsageError{fmt.Errorf("%s must be 0 (none) or positive, not %s", name, d)}
		}
	}
	for name, d := range map[string]time.Duration{
		"--swarm-read-timeout": o.SwarmReadTimeout, "--orphan-sweep-timeout": o.OrphanSweepTimeout,
	} {
		if d <= 0 {
			return UsageError{fmt.Errorf("%s must be positive, not %s", name, d)}
		}
	}
	if o.MCP.AllowWrites && !o.MCP.Enabled {
		return UsageError{errors.New("--mcp-allow-writes needs --mcp")}
	}
	if o.HA {
		if o.Once {
			return UsageError{fmt.Errorf("--ha and --once do not go together: a single pass has no one to hand over to")}
		}
		if o.LeaseDuration < 100*time.Millisecond {
			return UsageError{fmt.Errorf("--lease-duration must be at least 100ms, not %s", o.LeaseDuration)}
		}
		if o.HAID == "" {
			o.HAID = defaultHAID()
		}
	}
	for name, n := range map[string]int{"--queue-limit": o.QueueLimit, "--max-concurrent-passes": o.MaxPasses} {
		if n < 1 {
			return UsageError{fmt.Errorf("%s must be 1 or more, not %d", name, n)}
		}
	}
	return nil
}
