// Package daemon is the long-running controller, `flotilla controller`:
// it builds the reconciler and what runs beside it (the applications-file
// reloader, image automation, notifications, forge feedback and, with
// --listen, the API), runs the passes (under a leader lease with --ha) and
// stops them within the shutdown timeout. It sits at the top of the import
// graph, just below cmd/flotilla, which only turns the command line into
// Options and calls Run; the reconcile pass itself lives in reconcile.
package daemon

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

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/chartrepo"
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

// Run runs the controller until ctx ends or a signal stops it, after
// checking o. The first SIGTERM or SIGINT starts a graceful stop; a second
// one gets the default action, so Ctrl-C twice always ends the process.
// Refused options are a UsageError; a failure already reported to stdout,
// stderr or the log is ErrFailed.
func Run(ctx context.Context, o *Options, stdout, stderr io.Writer) error {
	if err := o.ConfigRepo.check(o.Config); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	return run(ctx, o, stdout, stderr)
}

// newLogger is the controller's logger, on w in the format and from the
// level the flags name.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, UsageError{fmt.Errorf("--log-level: %w", err)}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, UsageError{fmt.Errorf("--log-format: %q is not text or json", format)}
	}
}

// run builds the controller from o and runs it: one pass per application
// with --once, else until ctx ends.
func run(ctx context.Context, o *Options, stdout, stderr io.Writer) error {
	logger, err := newLogger(stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	defer applyMemoryLimit(ctx, o.MemoryLimit, logger)()
	fetcher := source.New(source.Options{CacheDir: filepath.Join(o.DataDir, "git"), Logger: logger,
		RemoteTimeout: o.GitTimeout, FetchTimeout: o.GitFetchTimeout, TreeBudget: o.GitTreeBudget})
	if source.DefaultCredentialsUnscoped() {
		logger.Warn("default git credentials are set but " + source.EnvCredentialHosts + " lists no host, so they are sent to no repository; list the hosts they are for")
	}
	broker := events.NewBroker(events.BrokerOptions{})
	rl := newControllerReloader(o, fetcher, broker, logger)
	file, apps, err := rl.load(ctx)
	if err != nil {
		printProblems(stderr, err)
		return ErrFailed
	}
	var ids *sopsage.Identities
	if o.SOPSKeyFile != "" {
		if ids, err = sopsage.ReadIdentityFile(o.SOPSKeyFile); err != nil {
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
	if !o.Once && o.Listen != "" {
		if tokens, err = api.TokensFromEnv(); err != nil {
			return err
		}
		if err := api.CheckListen(o.Listen, tokens, o.InsecureNoAuth); err != nil {
			return UsageError{err}
		}
		if webhooks, err = api.WebhookSecretsFromEnv(); err != nil {
			return err
		}
		if (o.TLSCert == "") != (o.TLSKey == "") {
			return UsageError{errors.New("--tls-cert and --tls-key go together")}
		}
		if tokenFile, err = openTokenFile(o.TokensFile, logger); err != nil {
			return UsageError{err}
		}
		if sso, err = o.SSO.build(); err != nil {
			return UsageError{err}
		}
	}
	m := metrics.New()
	m.SetBuildInfo(o.Version)
	var ls *lease.Lease
	var gate backend.WriteGate
	if o.HA {
		store, err := backend.NewLeaseStore(backend.Options{RequestTimeout: o.DockerTimeout}, o.ControllerID)
		if err != nil {
			return fmt.Errorf("connect to the swarm: %w", err)
		}
		if ls, err = lease.New(store, lease.Options{ID: o.HAID, Duration: o.LeaseDuration, Logger: logger}); err != nil {
			return UsageError{err}
		}
		gate = ls
	}
	be, err := backend.New(ctx, backend.Options{Logger: logger, OnRequest: m.DockerRequests(metrics.LocalSwarm), RequestTimeout: o.DockerTimeout, Gate: gate})
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
	if o.SSHConfig != "" {
		sshFlags = []string{"-F", o.SSHConfig}
	}
	fileName := o.Config
	if fileName == "" {
		fileName = o.ConfigRepo.Path
	}
	reg, err := swarms.New(ctx, file.Swarms, swarms.Options{
		File: fileName, Local: be, Metrics: m, Logger: logger, SSHFlags: sshFlags,
		Backend: backend.Options{Logger: logger, RequestTimeout: o.DockerTimeout, Gate: gate},
	})
	if err != nil {
		return fmt.Errorf("connect to the swarms: %w", err)
	}
	chartRepos, err := chartrepo.New(chartrepo.Options{CacheDir: filepath.Join(o.DataDir, "charts"), Observer: m})
	if err != nil {
		return err
	}
	// The key of the tags that name store secrets without a store version
	// (KV v1) lives beside the caches: lost, those secrets get new names and
	// their services roll once.
	stores, err := secretstore.Open(filepath.Join(o.DataDir, "secretstore.key"))
	if err != nil {
		return err
	}
	var box *renderbox.Box
	if !o.RenderInProcess {
		if box, err = renderbox.New(o.RenderBox); err != nil {
			return err
		}
	}
	ctl, err := reconcile.New(reconcile.Options{
		ControllerID:     o.ControllerID,
		Backend:          be,
		Backends:         reg.Backends(),
		Fetcher:          fetcher,
		Charts:           chartRepos,
		Logger:           logger,
		PruneOrphans:     o.Prune,
		ForbiddenSecrets: self.Forbidden(),
		SOPS:             ids,
		SecretStores:     stores,
		RenderLimits:     o.RenderLimits,
		RenderBox:        box,
		Events:           broker,
		Metrics:          m,

		SwarmReadTimeout:    o.SwarmReadTimeout,
		OrphanSweepTimeout:  o.OrphanSweepTimeout,
		QueueLimit:          o.QueueLimit,
		MaxConcurrentPasses: o.MaxPasses,
	}, apps)
	if err != nil {
		return err
	}
	if err := rl.attach(ctl, file); err != nil {
		return err
	}
	if o.Once {
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
			return ErrFailed
		}
		return nil
	}
	logger.Info("controller started", "component", "controller", "applications", len(apps), "controller_id", o.ControllerID)
	// Image automation commits to the applications' repositories on its
	// own intervals; the passes deploy what it committed.
	images := newImageLoop(o, ctl, ls, broker, m, logger)
	go images.Run(ctx)
	// Notifications follow the event stream on their own goroutines, so a
	// slow sink never holds up a pass.
	notifier, err := notify.New(file.Notifications, notify.Options{Logger: logger, AttemptTimeout: o.NotifyTimeout})
	if err != nil {
		return err
	}
	poster, err := newForgePoster(o, ctl, logger, m)
	if err != nil {
		return UsageError{fmt.Errorf("--console-url: %w", err)}
	}
	policy := access.NewPolicy(file.Projects)
	rl.policy = policy
	r := &runner{opts: o, ctl: ctl, policy: policy, reloader: rl, notifier: notifier, poster: poster, broker: broker,
		log: logger.With("component", "controller"), apiLog: logger.With("component", "api"), lease: ls}
	var lead func() api.Leadership
	if ls != nil {
		lead = leadership(ls)
	}
	if o.Listen != "" {
		r.handler = func(stopping <-chan struct{}) http.Handler {
			return api.New(api.Options{
				Controller:    apiwire.New(ctl).WithSwarms(reg).WithImages(images),
				ConfigProblem: rl.problem,
				Events:        broker,
				Metrics:       m,
				Tokens:        tokens,
				NoAuth:        o.InsecureNoAuth && !tokens.Has(access.Admin),
				PublicMetrics: o.PublicMetrics,
				TokenFile:     tokenFile,
				SSO:           sso,
				Policy:        policy,
				Webhooks:      api.WebhookOptions{Secrets: webhooks},
				UI:            uiHandler(o.UI),
				MCP:           api.MCPOptions{Enabled: o.MCP.Enabled, AllowWrites: o.MCP.AllowWrites, Version: o.Version},
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
