package main

import (
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/backend"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/daemon"
	"github.com/flotilla-gitops/flotilla/lease"
	"github.com/flotilla-gitops/flotilla/notify"
	"github.com/flotilla-gitops/flotilla/reconcile"
	"github.com/flotilla-gitops/flotilla/renderbox"
	"github.com/flotilla-gitops/flotilla/source"
)

// newControllerCmd is `flotilla controller`: its flags fill daemon.Options,
// and package daemon does the rest.
func newControllerCmd() *cobra.Command {
	o := &daemon.Options{}
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
			o.Version = version
			o.PlanComment = controllerPlan
			return daemon.Run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Config, "config", "c", "", "applications file (this or --config-repo is required)")
	addConfigRepoFlags(f, &o.ConfigRepo)
	f.StringVar(&o.DataDir, "data", defaultDataDir(), "directory for the git and chart caches")
	f.StringVar(&o.ControllerID, "controller-id", "flotilla", "this controller's id in owner stamps; controllers with different ids never touch each other's stacks")
	f.StringVar(&o.LogFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&o.SOPSKeyFile, "sops-age-key-file", os.Getenv("FLOTILLA_SOPS_AGE_KEY_FILE"), "age identities that decrypt SOPS-encrypted files of applications without a key of their own (also FLOTILLA_SOPS_AGE_KEY_FILE)")
	f.StringVar(&o.SSHConfig, "ssh-config", "", "ssh client configuration file for the swarms reached over ssh:// (keys, known hosts); default: the ssh client's own (~/.ssh/config)")
	f.Int64Var(&o.RenderLimits.MaxFileBytes, "render-max-file-bytes", compose.DefaultMaxFileBytes, "largest file (compose, env, config, secret) a render reads; -1 for no limit")
	f.Int64Var(&o.RenderLimits.MaxManifestBytes, "render-max-manifest-bytes", compose.DefaultMaxManifestBytes, "largest manifest a render may write (it is also a release record); -1 for no limit")
	f.BoolVar(&o.RenderInProcess, "render-in-process", false, "render charts in the controller's own process instead of a child process with its own limits (a chart that runs away can then take the controller down)")
	f.DurationVar(&o.RenderBox.Deadline, "render-timeout", renderbox.DefaultDeadline, "wall clock (and CPU time) one chart render's child process may take before it is killed")
	f.Int64Var(&o.RenderBox.Memory, "render-max-memory", renderbox.DefaultMemory, "address space in bytes one chart render's child process may add to what it starts with; -1 for no limit")
	f.StringVar(&o.Listen, "listen", ":8080", "address of the HTTP API, events, webhooks and /metrics; empty disables it")
	f.BoolVar(&o.InsecureNoAuth, "insecure-no-auth", false, "serve the API without tokens; refused unless --listen is a loopback address")
	f.StringVar(&o.TokensFile, "tokens-file", "", "YAML file of named token digests ({name, sha256}) that reach applications through the projects' role bindings; re-read when it changes, so a removed token is refused on its next request")
	addSSOFlags(f, &o.SSO)
	f.BoolVar(&o.PublicMetrics, "public-metrics", false, "serve /metrics without a token")
	f.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate file for the API (with --tls-key)")
	f.StringVar(&o.TLSKey, "tls-key", "", "TLS private key file for the API (with --tls-cert)")
	f.BoolVar(&o.UI, "ui", true, "serve the web UI at / and /ui/ (static files; every data call still needs a token)")
	f.BoolVar(&o.MCP.Enabled, "mcp", false, "serve a Model Context Protocol endpoint for agents at "+api.MCPPath+" (streamable HTTP, the API's tokens and roles): tools that list, get, diff, plan and read the history of applications")
	f.BoolVar(&o.MCP.AllowWrites, "mcp-allow-writes", false, "with --mcp, also offer the sync, refresh and rollback tools (each still needs the operator role on the application)")
	f.BoolVar(&o.Prune, "prune", false, "remove the stacks of applications that were removed from the applications file (only what this controller's records prove it created)")
	f.DurationVar(&o.GitTimeout, "git-timeout", source.DefaultRemoteTimeout, "deadline of the cheap remote check (ls-remote) every pass makes; a remote that does not answer within it fails that pass")
	f.DurationVar(&o.GitFetchTimeout, "git-fetch-timeout", source.DefaultFetchTimeout, "deadline of one git fetch or first clone, and of writing one commit's tree to disk")
	f.IntVar(&o.GitTreeBudget.Entries, "git-max-tree-entries", source.DefaultMaxTreeEntries, "files and directories one commit's tree may hold; a larger tree (a git bomb, say) is refused before anything is written; -1 for no limit")
	f.Int64Var(&o.GitTreeBudget.Bytes, "git-max-tree-bytes", source.DefaultMaxTreeBytes, "bytes one commit's tree may write to disk in all; -1 for no limit")
	f.IntVar(&o.GitTreeBudget.Depth, "git-max-tree-depth", source.DefaultMaxTreeDepth, "directory depth of the deepest path a commit's tree may hold; -1 for no limit")
	f.Int64Var(&o.GitTreeBudget.Blob, "git-max-file-bytes", source.DefaultMaxBlobBytes, "largest single file a commit's tree may hold; -1 for no limit")
	f.DurationVar(&o.DockerTimeout, "docker-timeout", backend.DefaultRequestTimeout, "deadline of every request to the Docker daemon (event streams exempt)")
	f.DurationVar(&o.NotifyTimeout, "notify-timeout", notify.DefaultAttemptTimeout, "deadline of one notification delivery attempt")
	f.StringVar(&o.ConsoleURL, "console-url", "", "the controller's public base URL (https://flotilla.example.com); commit statuses link to the application's page under it")
	f.DurationVar(&o.SwarmReadTimeout, "swarm-read-timeout", reconcile.DefaultSwarmReadTimeout, "deadline of the one read of the swarm a batch of passes shares; past it those passes report health Unknown")
	f.DurationVar(&o.OrphanSweepTimeout, "orphan-sweep-timeout", reconcile.DefaultOrphanSweepTimeout, "deadline of one look for (and, with --prune, removal of) the stacks of removed applications")
	f.IntVar(&o.QueueLimit, "queue-limit", reconcile.DefaultQueueLimit, "explicit requests (sync, rollback) that may wait per application; identical ones merge, one more is refused at once")
	f.IntVar(&o.MaxPasses, "max-concurrent-passes", reconcile.DefaultMaxConcurrentPasses, "passes that run at once (first passes of new applications get a lane a quarter as wide of their own)")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGTERM or SIGINT, how long a pass that is writing may take to finish, the API to drain and notifications to go out; past it the controller exits anyway, with status 1")
	f.DurationVar(&o.HTTP.Read, "http-read-timeout", api.DefaultReadTimeout, "longest an API request may take to send its headers and body; 0 for none")
	f.DurationVar(&o.HTTP.Write, "http-write-timeout", api.DefaultWriteTimeout, "longest an API answer may take to write, except event streams and waited syncs; 0 for none")
	f.DurationVar(&o.HTTP.Idle, "http-idle-timeout", api.DefaultIdleTimeout, "how long an idle keep-alive API connection stays open; 0 for none")
	f.BoolVar(&o.HA, "ha", false, "run as one of a highly available pair: only the holder of a leader lease kept in the swarm (a config named flotilla-lease.<controller-id>) runs passes and writes; the other answers the API read-only and takes over when the lease expires")
	f.StringVar(&o.HAID, "ha-id", "", "this controller's name in the leader lease; unique among the controllers sharing it (default $FLOTILLA_HA_ID, else hostname-pid)")
	f.DurationVar(&o.LeaseDuration, "lease-duration", lease.DefaultDuration, "with --ha, how long the leader lease lasts after each renewal; a standby takes over within two of them after the leader dies, and a leader that cannot renew stops writing a fifth of one before it runs out")
	o.MemoryLimit = daemon.MemoryLimit{Auto: true}
	f.Var(&o.MemoryLimit, "soft-memory-limit", "the Go runtime's soft memory limit: auto keeps it half as much again as the live heap and at least 64MiB, so the heap stays near what it holds rather than twice it; a size (such as 256MiB) fixes it; off leaves Go's default. GOMEMLIMIT, when set, wins")
	f.StringSliceVar(&o.RegistryPlainHTTP, "registry-plain-http", nil, "registries (host:port) image automation reads tags from over plain HTTP; loopback registries always are, every other over HTTPS")
	f.BoolVar(&o.Once, "once", false, "run one pass per application (applying even manual ones is NOT implied), print a summary and exit; exit 1 if any pass failed")
	return cmd
}

func defaultDataDir() string {
	if d := os.Getenv("FLOTILLA_DATA"); d != "" {
		return d
	}
	return filepath.Join(".", ".flotilla")
}

// addConfigRepoFlags defines the flags of an applications file kept in git.
func addConfigRepoFlags(f *pflag.FlagSet, c *daemon.ConfigRepoOptions) {
	f.StringVar(&c.Repo, "config-repo", "", "git repository holding the applications file (instead of --config); each new commit is loaded, and one that does not validate is reported and skipped")
	f.StringVar(&c.Revision, "config-revision", "HEAD", "branch, tag or commit of --config-repo")
	f.StringVar(&c.Path, "config-path", "applications.yaml", "the applications file's path inside --config-repo")
	f.DurationVar(&c.SetsInterval, "appset-interval", daemon.DefaultSetsInterval, "how often application sets read their generators' repositories again while the applications file is unchanged")
}

// addSSOFlags defines the single sign-on flags.
func addSSOFlags(f *pflag.FlagSet, o *daemon.SSOOptions) {
	f.StringVar(&o.Issuer, "oidc-issuer", "", "OpenID Connect issuer URL; enables console login through it at /auth/login")
	f.StringVar(&o.ClientID, "oidc-client-id", "", "the controller's client id at the OIDC provider")
	f.StringVar(&o.CLIClientID, "oidc-cli-client-id", "", "public client id at the OIDC provider that flotilla login uses (device or loopback browser flow); enables CLI login")
	f.StringVar(&o.SecretFile, "oidc-client-secret-file", "", "file holding the client secret (none for a public client)")
	f.StringVar(&o.RedirectURL, "oidc-redirect-url", "", "this controller's callback as the browser reaches it, registered at the provider: https://HOST/auth/callback")
	f.StringVar(&o.GroupsClaim, "oidc-groups-claim", "groups", "ID token claim that lists the user's groups, matched against the projects' role bindings (groups)")
	f.StringSliceVar(&o.AdminGroups, "oidc-admin-groups", nil, "groups whose members are global admins, as with the admin token")
	f.StringSliceVar(&o.ViewerGroups, "oidc-viewer-groups", nil, "groups whose members are global viewers, as with the read token")
	f.StringSliceVar(&o.Scopes, "oidc-scopes", []string{"openid", "profile", "email"}, "scopes requested at login (add groups for Dex)")
	f.DurationVar(&o.SessionTTL, "oidc-session-ttl", api.DefaultSessionTTL, "how long a console session lasts after login")
}
