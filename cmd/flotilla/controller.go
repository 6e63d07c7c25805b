package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/chartrepo"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/internal/apiwire"
	"github.com/flotilla-gitops/flotilla/lease"
	"github.com/flotilla-gitops/flotilla/metrics"
	"github.com/flotilla-gitops/flotilla/notify"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/renderbox"
	"github.com/flotilla-gitops/flotilla/secretstore"
	"github.com/flotilla-gitops/flotilla/sopsage"
	"github.com/flotilla-gitops/flotilla/source"
	"github.com/flotilla-gitops/flotilla/swarms"
	"github.com/flotilla-gitops/flotilla/web"
)

// controllerOptions are the flags of `flotilla controller`.
type controllerOptions struct {
	config       string
	configRepo   configRepoOptions
	dataDir      string
	controllerID string
	logFormat    string
	logLevel     string
	once         bool
	prune        bool
	memoryLimit  memoryLimit

	sopsKeyFile     string
	sshConfig       string
	renderLimits    compose.Limits
	renderInProcess bool
	renderBox       renderbox.Limits
	listen          string
	insecureNoAuth  bool
	tokensFile      string
	sso             ssoOptions
	publicMetrics   bool
	tlsCert         string
	tlsKey          string
	ui              bool
	mcp             api.MCPOptions

	// Deadlines of the external calls.
	gitTimeout      time.Duration
	gitFetchTimeout time.Duration
	gitTreeBudget   source.TreeBudget
	dockerTimeout   time.Duration
	notifyTimeout   time.Duration

	// consoleURL is the controller's public base URL, for the links of
	// forge feedback.
	consoleURL string

	// Bounds of the scheduler.
	swarmReadTimeout   time.Duration
	orphanSweepTimeout time.Duration
	queueLimit         int
	maxPasses          int

	shutdownTimeout time.Duration
	http            httpTimeouts

	// registryPlainHTTP lists the registries (host:port) image automation
	// speaks plain HTTP to besides loopback ones.
	registryPlainHTTP []string

	// A highly available pair (leading.go).
	ha            bool
	haID          string
	leaseDuration time.Duration
}

// httpTimeouts bound the API server's connections; see the flags.
type httpTimeouts struct {
	read, write, idle time.Duration
}

func newControllerCmd() *cobra.Command {
	o := &controllerOptions{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Reconcile every application of an applications file onto the swarm",
		Long: `Reconcile every application of an applications file onto its swarm, each
on its own interval, until interrupted.

The local swarm is reached through the usual Docker environment (DOCKER_HOST,
...); the applications file's swarms through their hosts, tried in order.
Swarms are connected when the controller starts: a reload of the file picks up
new and changed applications, but a new or changed swarm needs a restart.
The data directory only caches git checkouts and charts fetched from chart
repositories (by digest): the swarm holds the record of
what was deployed, so a controller restarted with an empty data directory
redeploys nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.configRepo.check(o.config); err != nil {
				return err
			}
			if err := o.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// The first signal starts a graceful stop; a second one gets
			// the default action, so Ctrl-C twice always ends the process.
			go func() {
				<-ctx.Done()
				stop()
			}()
			return runController(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.config, "config", "c", "", "applications file (this or --config-repo is required)")
	o.configRepo.addFlags(f)
	f.StringVar(&o.dataDir, "data", defaultDataDir(), "directory for the git and chart caches")
	f.StringVar(&o.controllerID, "controller-id", "flotilla", "this controller's id in owner stamps; controllers with different ids never touch each other's stacks")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&o.sopsKeyFile, "sops-age-key-file", os.Getenv("FLOTILLA_SOPS_AGE_KEY_FILE"), "age identities that decrypt SOPS-encrypted files of applications without a key of their own (also FLOTILLA_SOPS_AGE_KEY_FILE)")
	f.StringVar(&o.sshConfig, "ssh-config", "", "ssh client configuration file for the swarms reached over ssh:// (keys, known hosts); default: the ssh client's own (~/.ssh/config)")
	f.Int64Var(&o.renderLimits.MaxFileBytes, "render-max-file-bytes", compose.DefaultMaxFileBytes, "largest file (compose, env, config, secret) a render reads; -1 for no limit")
	f.Int64Var(&o.renderLimits.MaxManifestBytes, "render-max-manifest-bytes", compose.DefaultMaxManifestBytes, "largest manifest a render may write (it is also a release record); -1 for no limit")
	f.BoolVar(&o.renderInProcess, "render-in-process", false, "render charts in the controller's own process instead of a child process with its own limits (a chart that runs away can then take the controller down)")
	f.DurationVar(&o.renderBox.Deadline, "render-timeout", renderbox.DefaultDeadline, "wall clock (and CPU time) one chart render's child process may take before it is killed")
	f.Int64Var(&o.renderBox.Memory, "render-max-memory", renderbox.DefaultMemory, "address space in bytes one chart render's child process may add to what it starts with; -1 for no limit")
	f.StringVar(&o.listen, "listen", ":8080", "address of the HTTP API, events, webhooks and /metrics; empty disables it")
	f.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "serve the API without tokens; refused unless --listen is a loopback address")
	f.StringVar(&o.tokensFile, "tokens-file", "", "YAML file of named token digests ({name, sha256}) that reach applications through the projects' role bindings; re-read when it changes, so a removed token is refused on its next request")
	o.sso.addFlags(f)
	f.BoolVar(&o.publicMetrics, "public-metrics", false, "serve /metrics without a token")
	f.StringVar(&o.tlsCert, "tls-cert", "", "TLS certificate file for the API (with --tls-key)")
	f.StringVar(&o.tlsKey, "tls-key", "", "TLS private key file for the API (with --tls-cert)")
	f.BoolVar(&o.ui, "ui", true, "serve the web UI at / and /ui/ (static files; every data call still needs a token)")
	f.BoolVar(&o.mcp.Enabled, "mcp", false, "serve a Model Context Protocol endpoint for agents at "+api.MCPPath+" (streamable HTTP, the API's tokens and roles): tools that list, get, diff, plan and read the history of applications")
	f.BoolVar(&o.mcp.AllowWrites, "mcp-allow-writes", false, "with --mcp, also offer the sync, refresh and rollback tools (each still needs the operator role on the application)")
	f.BoolVar(&o.prune, "prune", false, "remove the stacks of applications that were removed from the applications file (only what this controller's records prove it created)")
	f.DurationVar(&o.gitTimeout, "git-timeout", source.DefaultRemoteTimeout, "deadline of the cheap remote check (ls-remote) every pass makes; a remote that does not answer within it fails that pass")
	f.DurationVar(&o.gitFetchTimeout, "git-fetch-timeout", source.DefaultFetchTimeout, "deadline of one git fetch or first clone, and of writing one commit's tree to disk")
	f.IntVar(&o.gitTreeBudget.Entries, "git-max-tree-entries", source.DefaultMaxTreeEntries, "files and directories one commit's tree may hold; a larger tree (a git bomb, say) is refused before anything is written; -1 for no limit")
	f.Int64Var(&o.gitTreeBudget.Bytes, "git-max-tree-bytes", source.DefaultMaxTreeBytes, "bytes one commit's tree may write to disk in all; -1 for no limit")
	f.IntVar(&o.gitTreeBudget.Depth, "git-max-tree-depth", source.DefaultMaxTreeDepth, "directory depth of the deepest path a commit's tree may hold; -1 for no limit")
	f.Int64Var(&o.gitTreeBudget.Blob, "git-max-file-bytes", source.DefaultMaxBlobBytes, "largest single file a commit's tree may hold; -1 for no limit")
	f.DurationVar(&o.dockerTimeout, "docker-timeout", backend.DefaultRequestTimeout, "deadline of every request to the Docker daemon (event streams exempt)")
	f.DurationVar(&o.notifyTimeout, "notify-timeout", notify.DefaultAttemptTimeout, "deadline of one notification delivery attempt")
	f.StringVar(&o.consoleURL, "console-url", "", "the controller's public base URL (https://flotilla.example.com); commit statuses link to the application's page under it")
	f.DurationVar(&o.swarmReadTimeout, "swarm-read-timeout", reconcile.DefaultSwarmReadTimeout, "deadline of the one read of the swarm a batch of passes shares; past it those passes report health Unknown")
	f.DurationVar(&o.orphanSweepTimeout, "orphan-sweep-timeout", reconcile.DefaultOrphanSweepTimeout, "deadline of one look for (and, with --prune, removal of) the stacks of removed applications")
	f.IntVar(&o.queueLimit, "queue-limit", reconcile.DefaultQueueLimit, "explicit requests (sync, rollback) that may wait per application; identical ones merge, one more is refused at once")
	f.IntVar(&o.maxPasses, "max-concurrent-passes", reconcile.DefaultMaxConcurrentPasses, "passes that run at once (first passes of new applications get a lane a quarter as wide of their own)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGTERM or SIGINT, how long a pass that is writing may take to finish, the API to drain and notifications to go out; past it the controller exits anyway, with status 1")
	f.DurationVar(&o.http.read, "http-read-timeout", api.DefaultReadTimeout, "longest an API request may take to send its headers and body; 0 for none")
	f.DurationVar(&o.http.write, "http-write-timeout", api.DefaultWriteTimeout, "longest an API answer may take to write, except event streams and waited syncs; 0 for none")
	f.DurationVar(&o.http.idle, "http-idle-timeout", api.DefaultIdleTimeout, "how long an idle keep-alive API connection stays open; 0 for none")
	f.BoolVar(&o.ha, "ha", false, "run as one of a highly available pair: only the holder of a leader lease kept in the swarm (a config named flotilla-lease.<controller-id>) runs passes and writes; the other answers the API read-only and takes over when the lease expires")
	f.StringVar(&o.haID, "ha-id", "", "this controller's name in the leader lease; unique among the controllers sharing it (default $FLOTILLA_HA_ID, else hostname-pid)")
	f.DurationVar(&o.leaseDuration, "lease-duration", lease.DefaultDuration, "with --ha, how long the leader lease lasts after each renewal; a standby takes over within two of them after the leader dies, and a leader that cannot renew stops writing a fifth of one before it runs out")
	o.memoryLimit = memoryLimit{auto: true}
	f.Var(&o.memoryLimit, "soft-memory-limit", "the Go runtime's soft memory limit: auto keeps it half as much again as the live heap and at least 64MiB, so the heap stays near what it holds rather than twice it; a size (such as 256MiB) fixes it; off leaves Go's default. GOMEMLIMIT, when set, wins")
	f.StringSliceVar(&o.registryPlainHTTP, "registry-plain-http", nil, "registries (host:port) image automation reads tags from over plain HTTP; loopback registries always are, every other over HTTPS")
	f.BoolVar(&o.once, "once", false, "run one pass per application (applying even manual ones is NOT implied), print a summary and exit; exit 1 if any pass failed")
	return cmd
}

func defaultDataDir() string {
	if d := os.Getenv("FLOTILLA_DATA"); d != "" {
		return d
	}
	return filepath.Join(".", ".flotilla")
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level: %w", err)}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, usageError{fmt.Errorf("--log-format: %q is not text or json", format)}
	}
}

func runController(ctx context.Context, o *controllerOptions, stdout, stderr io.Writer) error {
	logger, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	defer applyMemoryLimit(ctx, o.memoryLimit, logger)()
	fetcher := source.New(source.Options{CacheDir: filepath.Join(o.dataDir, "git"), Logger: logger,
		RemoteTimeout: o.gitTimeout, FetchTimeout: o.gitFetchTimeout, TreeBudget: o.gitTreeBudget})
	if source.DefaultCredentialsUnscoped() {
		logger.Warn("default git credentials are set but " + source.EnvCredentialHosts + " lists no host, so they are sent to no repository; list the hosts they are for")
	}
	broker := events.NewBroker(events.BrokerOptions{})
	rl := newControllerReloader(o, fetcher, broker, logger)
	file, apps, err := rl.load(ctx)
	if err != nil {
		printProblems(stderr, err)
		return exitError{exitFailed}
	}
	var ids *sopsage.Identities
	if o.sopsKeyFile != "" {
		if ids, err = sopsage.ReadIdentityFile(o.sopsKeyFile); err != nil {
			return fmt.Errorf("--sops-age-key-file: %w", err)
		}
		if shared := sharedSOPSKey(apps); len(shared) > 1 {
			logger.Warn("the controller-wide SOPS key decrypts for several projects, so a file encrypted for one opens in another's repository; give each project its own sops.ageKeyFile",
				"projects", shared)
		}
	}
	var tokens api.Tokens
	var tokenFile *access.TokenFile
	var sso *api.SSO
	var webhooks api.WebhookSecrets
	if !o.once && o.listen != "" {
		if tokens, err = api.TokensFromEnv(); err != nil {
			return err
		}
		if err := api.CheckListen(o.listen, tokens, o.insecureNoAuth); err != nil {
			return usageError{err}
		}
		if webhooks, err = api.WebhookSecretsFromEnv(); err != nil {
			return err
		}
		if (o.tlsCert == "") != (o.tlsKey == "") {
			return usageError{errors.New("--tls-cert and --tls-key go together")}
		}
		if tokenFile, err = openTokenFile(o.tokensFile, logger); err != nil {
			return usageError{err}
		}
		if sso, err = o.sso.build(); err != nil {
			return usageError{err}
		}
	}
	m := metrics.New()
	m.SetBuildInfo(version)
	var ls *lease.Lease
	var gate backend.WriteGate
	if o.ha {
		store, err := backend.NewLeaseStore(backend.Options{RequestTimeout: o.dockerTimeout}, o.controllerID)
		if err != nil {
			return fmt.Errorf("connect to the swarm: %w", err)
		}
		if ls, err = lease.New(store, lease.Options{ID: o.haID, Duration: o.leaseDuration, Logger: logger}); err != nil {
			return usageError{err}
		}
		gate = ls
	}
	be, err := backend.New(ctx, backend.Options{Logger: logger, OnRequest: m.DockerRequests(metrics.LocalSwarm), RequestTimeout: o.dockerTimeout, Gate: gate})
	if err != nil {
		return fmt.Errorf("connect to the swarm: %w", err)
	}
	// Running as a swarm service, the controller protects its own stack from
	// sweeps and its own secrets from every application.
	self, err := be.DetectSelf(ctx)
	if err != nil {
		logger.Warn("could not tell whether the controller runs as a swarm service", "error", err)
	}
	be = be.WithSelf(self)
	// The other swarms of the applications file, each with its own client;
	// none is contacted yet, so one that is down costs only its own
	// applications' first passes.
	var sshFlags []string
	if o.sshConfig != "" {
		sshFlags = []string{"-F", o.sshConfig}
	}
	fileName := o.config
	if fileName == "" {
		fileName = o.configRepo.path
	}
	reg, err := swarms.New(ctx, file.Swarms, swarms.Options{
		File: fileName, Local: be, Metrics: m, Logger: logger, SSHFlags: sshFlags,
		Backend: backend.Options{Logger: logger, RequestTimeout: o.dockerTimeout, Gate: gate},
	})
	if err != nil {
		return fmt.Errorf("connect to the swarms: %w", err)
	}
	chartRepos, err := chartrepo.New(chartrepo.Options{CacheDir: filepath.Join(o.dataDir, "charts"), Observer: m})
	if err != nil {
		return err
	}
	// The key of the tags that name store secrets without a store version
	// (KV v1) lives beside the caches: lost, those secrets get new names and
	// their services roll once.
	stores, err := secretstore.Open(filepath.Join(o.dataDir, "secretstore.key"))
	if err != nil {
		return err
	}
	var box *renderbox.Box
	if !o.renderInProcess {
		if box, err = renderbox.New(o.renderBox); err != nil {
			return err
		}
	}
	ctl, err := reconcile.New(reconcile.Options{
		ControllerID:     o.controllerID,
		Backend:          be,
		Backends:         reg.Backends(),
		Fetcher:          fetcher,
		Charts:           chartRepos,
		Logger:           logger,
		PruneOrphans:     o.prune,
		ForbiddenSecrets: self.Forbidden(),
		SOPS:             ids,
		SecretStores:     stores,
		RenderLimits:     o.renderLimits,
		RenderBox:        box,
		Events:           broker,
		Metrics:          m,

		SwarmReadTimeout:    o.swarmReadTimeout,
		OrphanSweepTimeout:  o.orphanSweepTimeout,
		QueueLimit:          o.queueLimit,
		MaxConcurrentPasses: o.maxPasses,
	}, apps)
	if err != nil {
		return err
	}
	if err := rl.attach(ctl, file); err != nil {
		return err
	}
	if o.once {
		failed := false
		// The look for orphans and the passes concern different stacks, as
		// they do in a running controller, where they run side by side too;
		// the orphans are still printed first.
		var (
			orphans   []reconcile.Orphan
			orphanErr error
			looked    = make(chan struct{})
		)
		go func() {
			defer close(looked)
			orphans, orphanErr = ctl.SweepOrphans(ctx)
		}()
		results := ctl.RunOnce(ctx)
		<-looked
		if orphanErr != nil {
			fmt.Fprintf(stderr, "stacks of removed applications not checked: %v\n", orphanErr)
		}
		for _, orphan := range orphans {
			printOrphan(stdout, orphan)
		}
		for _, res := range results {
			printResult(stdout, res.App, res, res.Err)
			failed = failed || res.Err != nil
		}
		if failed {
			return exitError{exitFailed}
		}
		return nil
	}
	logger.Info("controller started", "component", "controller", "applications", len(apps), "controller_id", o.controllerID)
	// Image automation commits to the applications' repositories on its
	// own intervals; the passes deploy what it committed.
	images := newImageLoop(o, ctl, ls, broker, m, logger)
	go images.Run(ctx)
	// Notifications follow the event stream on their own goroutines, so a
	// slow sink never holds up a pass.
	notifier, err := notify.New(file.Notifications, notify.Options{Logger: logger, AttemptTimeout: o.notifyTimeout})
	if err != nil {
		return err
	}
	poster, err := newForgePoster(o, ctl, logger, m)
	if err != nil {
		return usageError{fmt.Errorf("--console-url: %w", err)}
	}
	policy := access.NewPolicy(file.Projects)
	rl.policy = policy
	r := &runner{opts: o, ctl: ctl, policy: policy, reloader: rl, notifier: notifier, poster: poster, broker: broker,
		log: logger.With("component", "controller"), apiLog: logger.With("component", "api"), lease: ls}
	var lead func() api.Leadership
	if ls != nil {
		lead = leadership(ls)
	}
	if o.listen != "" {
		r.handler = func(stopping <-chan struct{}) http.Handler {
			return api.New(api.Options{
				Controller:    apiwire.New(ctl).WithSwarms(reg).WithImages(images),
				ConfigProblem: rl.problem,
				Events:        broker,
				Metrics:       m,
				Tokens:        tokens,
				NoAuth:        o.insecureNoAuth && !tokens.Has(access.Admin),
				PublicMetrics: o.publicMetrics,
				TokenFile:     tokenFile,
				SSO:           sso,
				Policy:        policy,
				Webhooks:      api.WebhookOptions{Secrets: webhooks},
				UI:            uiHandler(o.ui),
				MCP:           api.MCPOptions{Enabled: o.mcp.Enabled, AllowWrites: o.mcp.AllowWrites, Version: version},
				Logger:        logger,
				Stopping:      stopping,
				Leadership:    lead,
				Ready: func(ctx context.Context) error {
					// A standby has run no pass; it is ready to answer
					// reads once the swarm answers.
					if (ls == nil || ls.State().Leader) && !ctl.InitialPassesDone() {
						return errors.New("initial sync not done")
					}
					if _, err := be.SwarmNodes(ctx); err != nil {
						return fmt.Errorf("swarm not reachable: %w", err)
					}
					return nil
				},
			})
		}
	}
	return r.run(ctx)
}

// openTokenFile reads --tokens-file, if given, and logs its later reloads
// and the failures that leave it refusing every token.
func openTokenFile(path string, logger *slog.Logger) (*access.TokenFile, error) {
	if path == "" {
		return nil, nil
	}
	tf, err := access.OpenTokenFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tokens-file: %w", err)
	}
	log := logger.With("component", "api", "file", path)
	tf.OnLoad = func(n int) { log.Info("tokens file reloaded", "tokens", n) }
	tf.OnError = func(err error) {
		log.Error("tokens file is unusable; every token of it is refused until it is fixed", "error", err)
	}
	log.Info("tokens file loaded")
	return tf, nil
}

// uiHandler is the web UI, or nil when --ui=false.
func uiHandler(on bool) http.Handler {
	if !on {
		return nil
	}
	return web.Handler()
}

// printResult writes one line per application for --once.
func printResult(w io.Writer, app string, res reconcile.Result, err error) {
	s := res.Status
	if err != nil {
		fmt.Fprintf(w, "%s: FAILED: %v\n", app, err)
		return
	}
	line := fmt.Sprintf("%s: %s, sync %s, health %s", app, res.Action, s.Sync, s.Health)
	if res.Deployed != nil {
		d := res.Deployed
		line += fmt.Sprintf(", revision %d (created %d, updated %d, unchanged %d, %d writes)",
			res.Revision, len(d.Created), len(d.Updated), len(d.Unchanged), d.Writes)
	}
	if s.HealthMessage != "" {
		line += ": " + s.HealthMessage
	}
	fmt.Fprintln(w, line)
}

// printOrphan writes one line per stack of a removed application. The
// counts are of what the sweep found on the swarm, by kind: a record that
// declared more than is left (a `docker stack rm` since) counts only what
// is left, and a stack with nothing left says so.
func printOrphan(w io.Writer, o reconcile.Orphan) {
	switch {
	case o.Error != "":
		fmt.Fprintf(w, "stack %s (of removed %s): FAILED: %s\n", o.Stack, o.Owner, o.Error)
	case o.Sweep.DryRun && len(o.Sweep.Pending) == 0:
		fmt.Fprintf(w, "stack %s (of removed %s): nothing left on the swarm that --prune would remove\n", o.Stack, o.Owner)
	case o.Sweep.DryRun:
		fmt.Fprintf(w, "stack %s (of removed %s): kept; --prune would remove %s\n", o.Stack, o.Owner, countByKind(o.Sweep.Pending))
	default:
		fmt.Fprintf(w, "stack %s (of removed %s): removed %s\n", o.Stack, o.Owner, countByKind(o.Sweep.Removed))
	}
}

// printProblems writes every problem of a joined error on its own line.
func printProblems(w io.Writer, err error) {
	var multi interface{ Unwrap() []error }
	if errors.As(err, &multi) {
		for _, e := range multi.Unwrap() {
			fmt.Fprintln(w, e)
		}
		return
	}
	fmt.Fprintln(w, err)
}
