// Package application defines the applications file: what each application
// deploys, from where, and how it is kept in sync. It parses strictly (an
// unknown key is an error with its line), applies defaults in one place, and
// validates every field before the controller acts on any of it.
//
// In a reconcile pass it is the input: each Application becomes one loop.
package application

import (
	"path"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/events"
)

// APIVersion is the only applications file version this build reads.
const APIVersion = "flotilla/v1"

// Defaults and bounds applied by Defaults and checked by Validate.
const (
	DefaultInterval      = 3 * time.Minute
	MinInterval          = 10 * time.Second
	DefaultHistory       = 10
	DefaultRetainRotated = 2
	DefaultRevision      = "HEAD"
	DefaultPath          = "."
	// DefaultUsername is what the git client sends with PasswordFile when no
	// UsernameFile is given: token-based hosts ignore the name but require
	// one. It is applied where credentials are read, not by Defaults, since
	// Credentials holds file names only.
	DefaultUsername = "git"
	// MaxNameLength bounds Name and Stack: a DNS label, so service names
	// derived from them stay resolvable on overlay networks.
	MaxNameLength = 63
)

// File is a whole applications file.
type File struct {
	// APIVersion must be "flotilla/v1". Required.
	APIVersion string `yaml:"apiVersion"`
	// Applications may be empty: a controller with nothing to deploy yet is
	// a valid state.
	Applications []Application `yaml:"applications"`
	// Notifications are the sinks the controller reports events to. They
	// belong to the controller, not to one application. Default: none.
	Notifications []Notification `yaml:"notifications,omitempty"`
	// Projects group applications for access control and limit the
	// repositories and stacks their members use. Default: none, and only
	// the controller's global tokens reach any application.
	Projects []Project `yaml:"projects,omitempty"`
	// Swarms are the swarms besides the controller's own that applications
	// may name as their destination. Default: none, every application
	// deploys to the local swarm.
	Swarms []Swarm `yaml:"swarms,omitempty"`
	// SyncWindows allow or deny automated syncs at recurring times; see
	// SyncWindow. Default: none, syncs run at any time.
	SyncWindows []SyncWindow `yaml:"syncWindows,omitempty"`
	// ApplicationSets generate applications from a template; see
	// ApplicationSet. Default: none.
	ApplicationSets []ApplicationSet `yaml:"applicationSets,omitempty"`
	// SecretStores are the secret stores compose secrets may name by
	// reference, and who may read what in them; see SecretStore.
	// Default: none.
	SecretStores []SecretStore `yaml:"secretStores,omitempty"`

	// meta remembers where each field was written so that Validate can
	// point at lines; nil for a File built in code.
	meta *meta
}

// Application is one git source deployed to one stack.
type Application struct {
	// Name identifies the application: ^[a-z0-9][a-z0-9-]*$, at most 63
	// characters, unique in a file. Required.
	Name string `yaml:"name"`
	// Source says where the manifest comes from. Required.
	Source Source `yaml:"source"`
	// Stack is the swarm stack namespace. Default: Name. Same rule as Name,
	// and no two applications may claim one stack.
	Stack string `yaml:"stack,omitempty"`
	// SyncPolicy says when and how the application is applied.
	SyncPolicy SyncPolicy `yaml:"syncPolicy,omitempty"`
	// Allow lists what the stack may reach outside its namespace. Default:
	// nothing.
	Allow Allow `yaml:"allow,omitempty"`
	// Adopt lets the application take over a namespace that already holds
	// services no record accounts for. Default false.
	Adopt bool `yaml:"adopt,omitempty"`
	// History is how many revision records are kept. Default 10, minimum 1.
	History int `yaml:"history,omitempty"`
	// RegistryAuth names the registry credential this application's service
	// writes carry, so every node can pull its private images. Default:
	// none (pulls are anonymous, or use what each node has).
	RegistryAuth *RegistryAuth `yaml:"registryAuth,omitempty"`
	// SOPS says how files encrypted with SOPS in this application's
	// repository are decrypted. Default: with its project's sops key if
	// the project has one, else with the controller's
	// --sops-age-key-file, if it was given.
	SOPS *SOPS `yaml:"sops,omitempty"`
	// Destination names the swarm the stack is deployed to: one of the
	// file's swarms, or LocalDestination. Default LocalDestination. The same
	// stack on two destinations is two stacks.
	Destination string `yaml:"destination,omitempty"`

	// DependsOn names applications that must be Synced and Healthy at
	// their current revision before this one syncs. Default: none.
	DependsOn []string `yaml:"dependsOn,omitempty"`

	// Feedback posts deploy statuses and the plan back to the forge; see
	// Feedback. Default: none.
	Feedback *Feedback `yaml:"feedback,omitempty"`

	// ImageUpdates commits newer image tags or digests to the source
	// repository; see ImageUpdates. Default: none.
	ImageUpdates *ImageUpdates `yaml:"imageUpdates,omitempty"`

	// Generated is set on an application an ApplicationSet made; it is
	// never read from the file.
	Generated *Generated `yaml:"-"`
	// SecretStores are the stores, and their paths, the file grants this
	// application, set by Defaults. It is never read from the file, so a
	// repository cannot widen it.
	SecretStores []StoreGrant `yaml:"-"`
	// Project is what the application's project imposes on the renders of
	// its repositories, set by Defaults; nil outside a project. It is never
	// read from the file.
	Project *ProjectTerms `yaml:"-"`
}

// ProjectTerms are the parts of a project that bind what a member's
// repositories may reach at render time.
type ProjectTerms struct {
	// Name is the project's.
	Name string
	// SourceRepos are the project's sourceRepos globs; empty, any
	// repository. Chart dependency repositories are held to them too.
	SourceRepos []string
	// SOPS is the project's key, used in place of the controller's when
	// the application has no key of its own.
	SOPS *SOPS
}

// SOPSKey is the key that decrypts the application's SOPS files, and the
// field that names it for errors: its own, else its project's; nil means
// the controller's --sops-age-key-file. An own or project key replaces the
// controller's, so a team's files open only for the applications given its
// key. A pull-request preview has only its own (its set's preview.sops),
// and nil means none at all: see DecryptsWithControllerKey.
func (a *Application) SOPSKey() (key *SOPS, field string) {
	if a.SOPS != nil {
		return a.SOPS, "sops.ageKeyFile"
	}
	if a.IsPreview() {
		return nil, ""
	}
	if a.Project != nil && a.Project.SOPS != nil {
		return a.Project.SOPS, "project " + a.Project.Name + " sops.ageKeyFile"
	}
	return nil, ""
}

// IsPreview reports whether a pull-request generator made the application:
// its code is whatever the pull request holds, so it gets only what its set
// grants previews (allow list, SOPS key, store entries), never what its
// name, project or template would give another application.
func (a *Application) IsPreview() bool { return a.Generated != nil && a.Generated.Preview }

// DecryptsWithControllerKey reports whether the application's SOPS files
// are opened with the controller's --sops-age-key-file: it has no key of
// its own or of its project, and it is not a preview.
func (a *Application) DecryptsWithControllerKey() bool {
	k, _ := a.SOPSKey()
	return k == nil && !a.IsPreview()
}

// AllowsRepo reports whether the project admits the repository URL u:
// the same match as source.repoURL's.
func (t *ProjectTerms) AllowsRepo(u string) bool {
	return t == nil || len(t.SourceRepos) == 0 || matchAny(t.SourceRepos, u)
}

// LocalDestination is the destination of the controller's own Docker
// environment (DOCKER_HOST and friends, or the local socket). No swarm of
// the file may take the name.
const LocalDestination = "local"

// Swarm is a swarm the controller reaches through one of its managers'
// Docker API endpoints.
type Swarm struct {
	// Name is what applications name as their destination: the same rule
	// as an application's name, unique among swarms, and not "local".
	// Required.
	Name string `yaml:"name"`
	// Hosts are the managers' Docker endpoints, tried in order:
	// unix:///path, tcp://host:port or ssh://[user@]host[:port][/socket]
	// (docker's SSH connection helper, which runs the ssh client and
	// `docker system dial-stdio` on the host, against the remote socket
	// when a path is given). The controller keeps using the one that
	// answered until it stops answering. At least one required.
	Hosts []string `yaml:"hosts"`
	// TLS secures and authenticates the tcp:// hosts. Default: none, and
	// tcp hosts are spoken to in plain HTTP.
	TLS *TLS `yaml:"tls,omitempty"`
}

// TLS names the files (absolute paths on the controller's host, typically
// swarm secrets) that secure a swarm's tcp:// hosts, as docker's --tlsverify
// with --tlscacert, --tlscert and --tlskey does. The files are read when the
// controller starts or reloads the applications file.
type TLS struct {
	// CAFile verifies the daemons' certificates. Required.
	CAFile string `yaml:"caFile"`
	// CertFile and KeyFile are the controller's client certificate and
	// key; both or neither. Default: none, for a daemon that does not ask.
	CertFile string `yaml:"certFile,omitempty"`
	KeyFile  string `yaml:"keyFile,omitempty"`
}

// SOPS points at the age identities that decrypt an application's
// SOPS-encrypted files at render time. Given, they replace the
// controller-wide key for this application, so one application's
// repository cannot get another's files decrypted by copying them.
type SOPS struct {
	// AgeKeyFile is an age identity file (AGE-SECRET-KEY-1... lines, as
	// age-keygen writes) at an absolute path on the controller's host,
	// typically a mounted swarm secret. Required.
	AgeKeyFile string `yaml:"ageKeyFile"`
}

// RegistryAuth points at a Docker config.json on the controller's host,
// typically a swarm secret mounted into the controller. Only its "auths"
// section is read; credential helpers are not run. Like Credentials it holds
// a path and never the secret, so the applications file stays safe to show.
type RegistryAuth struct {
	// Secret names a swarm secret mounted into the controller's service;
	// it is read from /run/secrets/<Secret>. Exactly one of Secret and
	// File is required.
	Secret string `yaml:"secret,omitempty"`
	// File is the config.json's absolute path on the controller's host.
	File string `yaml:"file,omitempty"`
}

// SecretsDir is where Swarm mounts a service's secrets.
const SecretsDir = "/run/secrets"

// Path is the file the credential is read from.
func (r *RegistryAuth) Path() string {
	if r.Secret != "" {
		return path.Join(SecretsDir, r.Secret)
	}
	return r.File
}

// Source is a directory at a revision of a git repository.
type Source struct {
	// RepoURL is https://host/…, http://host/… (no credentials allowed),
	// ssh://host/…, user@host:path, file:///… or an absolute local path.
	// Credentials embedded in the URL are refused. Required.
	RepoURL string `yaml:"repoURL"`
	// Revision is a branch, tag or full commit SHA. Default "HEAD".
	Revision string `yaml:"revision,omitempty"`
	// Path is the directory inside the repository, relative and never
	// leaving it. Default "."; stored cleaned.
	Path string `yaml:"path,omitempty"`
	// Compose names the compose and env files. Default: none listed, and
	// the compose package looks for its standard file names in Path.
	// Not allowed with Chart.
	Compose Compose `yaml:"compose,omitempty"`
	// Chart, when present, says Path is a chart directory (Chart.yaml,
	// values.yaml, templates/) and gives it its values; `chart:` with no
	// options counts as present. Default: absent, Path is a compose
	// project.
	Chart *Chart `yaml:"chart,omitempty"`
	// Values, only with Chart, takes value files from a second git
	// repository, so one chart can serve many stacks whose values live
	// elsewhere. Default: none.
	Values *ValuesSource `yaml:"values,omitempty"`
	// Credentials names files holding git credentials; never the secrets
	// themselves. Default: none (anonymous access).
	Credentials *Credentials `yaml:"credentials,omitempty"`
}

// ValuesSource is a git repository holding a chart's value files. They
// are laid over Chart.ValueFiles and under Chart.Values and Chart.Set; a
// commit there is a change of the application like a commit of the chart.
type ValuesSource struct {
	// RepoURL takes the same forms as Source.RepoURL. Required.
	RepoURL string `yaml:"repoURL"`
	// Revision is a branch, tag or full commit SHA. Default "HEAD".
	Revision string `yaml:"revision,omitempty"`
	// Files are relative to the repository's root, never leaving it, and
	// merged in order; they may be SOPS-encrypted. At least one required.
	Files []string `yaml:"files"`
	// Credentials are as Source.Credentials. Default: none.
	Credentials *Credentials `yaml:"credentials,omitempty"`
}

// Compose names the compose files and env files of a source, relative to
// Source.Path. Each may reach elsewhere in the repository (../common/x.yml)
// but never outside it.
type Compose struct {
	// Files are merged in order, like repeated -c. Default: none listed.
	Files []string `yaml:"files,omitempty"`
	// EnvFiles feed interpolation; the controller's own environment never
	// does. Default: none.
	EnvFiles []string `yaml:"envFiles,omitempty"`
}

// Chart gives a chart its values. Precedence, lowest first: the chart's
// values.yaml, each of ValueFiles in order, Values, Set.
//
// With RepoURL the chart comes from a chart repository (an index.yaml
// under RepoURL) instead of git: Source.RepoURL and Source.Path are then
// not given, and ValueFiles are relative to the chart in its archive.
type Chart struct {
	// RepoURL is a chart repository, https://host/path (http only with
	// Insecure). Default: none, the chart is the git directory Source.Path.
	RepoURL string `yaml:"repoURL,omitempty"`
	// Name is the chart's name in the repository's index. Required with
	// RepoURL.
	Name string `yaml:"name,omitempty"`
	// Version is a SemVer constraint ("~7.2", "^1", "1.4.2"); the newest
	// matching version is deployed. Required with RepoURL.
	Version string `yaml:"version,omitempty"`
	// Insecure allows a plain-http RepoURL. Default false.
	Insecure bool `yaml:"insecure,omitempty"`
	// Credentials names files holding the repository's credentials.
	// Default: none.
	Credentials *ChartCredentials `yaml:"credentials,omitempty"`
	// ValueFiles are relative to Source.Path, may reach elsewhere in the
	// repository but never outside it, and may be SOPS-encrypted.
	// Default: none.
	ValueFiles []string `yaml:"valueFiles,omitempty"`
	// Values is a mapping laid over the value files. Default: none.
	Values Values `yaml:"values,omitempty"`
	// Set maps dotted keys ("image.tag", `a\.b` for a key with a dot) to
	// single values, laid over everything else. Default: none.
	Set Values `yaml:"set,omitempty"`
}

// Values is a free-form mapping of chart values: the one place the
// applications file has keys it cannot check, since the chart defines them.
type Values map[string]any

// Credentials points at files on the controller's host (absolute paths)
// that authenticate git. There are deliberately no fields for inline
// secrets: a file can be a swarm secret and never appears in this file, in
// logs or in the API.
type Credentials struct {
	// UsernameFile and PasswordFile give HTTPS basic auth; a token goes in
	// PasswordFile. UsernameFile requires PasswordFile; without it the
	// username is DefaultUsername.
	UsernameFile string `yaml:"usernameFile,omitempty"`
	PasswordFile string `yaml:"passwordFile,omitempty"`
	// SSHKeyFile is a private key for ssh and scp-like URLs; KnownHostsFile
	// pins host keys and is required with SSHKeyFile.
	SSHKeyFile     string `yaml:"sshKeyFile,omitempty"`
	KnownHostsFile string `yaml:"knownHostsFile,omitempty"`
}

// ChartCredentials points at files (absolute paths on the controller's
// host) that authenticate a chart repository: basic auth with
// UsernameFile and PasswordFile, or a bearer token in TokenFile.
type ChartCredentials struct {
	UsernameFile string `yaml:"usernameFile,omitempty"`
	PasswordFile string `yaml:"passwordFile,omitempty"`
	TokenFile    string `yaml:"tokenFile,omitempty"`
}

// FromRepository reports whether s is a chart from a chart repository
// rather than a directory in git.
func (s *Source) FromRepository() bool { return s.Chart != nil && s.Chart.RepoURL != "" }

// SyncPolicy says whether changes apply by themselves and how often to look.
type SyncPolicy struct {
	// Automated, when present, applies every change; `automated:` with no
	// options counts as present. Absent means manual: plan and report,
	// apply only on an explicit sync.
	Automated *Automated `yaml:"automated,omitempty"`
	// Interval between passes, a duration such as "90s". Default 3m
	// (absent or 0), minimum 10s.
	Interval Duration `yaml:"interval,omitempty"`
	// RetainRotated is how many superseded configs/secrets the sweep keeps.
	// Default 2, minimum 0.
	RetainRotated *int `yaml:"retainRotated,omitempty"`
	// Wait, when present, makes a sync wait for convergence. Default: absent,
	// a sync returns once the deploy is accepted.
	Wait *Wait `yaml:"wait,omitempty"`
	// Rollback, when present, rolls a sync back by itself when the
	// application stays Degraded after it. Default: absent, never.
	Rollback *Rollback `yaml:"rollback,omitempty"`
}

// Rollback says when a sync is rolled back without anyone asking: the
// previous revision is redeployed and pinned until the next commit, as an
// explicit rollback would be.
type Rollback struct {
	// OnDegraded is how long the application must stay Degraded after a
	// sync applied before that sync is rolled back. Required, positive.
	OnDegraded Duration `yaml:"onDegraded,omitempty"`
}

// Automated holds the options of an automated application. Each defaults
// to false.
type Automated struct {
	// Prune removes what the repository stopped declaring.
	Prune bool `yaml:"prune,omitempty"`
	// SelfHeal corrects live drift on the next pass.
	SelfHeal bool `yaml:"selfHeal,omitempty"`
	// PruneVolumes lets the sweep remove named volumes.
	PruneVolumes bool `yaml:"pruneVolumes,omitempty"`
}

// Wait bounds how long a sync waits for the stack to converge.
type Wait struct {
	// Timeout is required and positive: an unbounded wait would stall the
	// application's loop on one stuck task.
	Timeout Duration `yaml:"timeout,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("3m",
// "90s") in YAML and JSON. A bare number is refused rather than guessed as
// seconds or nanoseconds.
type Duration struct{ time.Duration }

// UnmarshalYAML accepts a duration string only.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration string, so a marshalled File parses back.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalText writes the duration string, for JSON and other text formats.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// NotificationType is the request format a notification sink speaks.
type NotificationType string

// Notification sink types.
const (
	// NotifySlack posts {"text": ...} to a Slack-compatible incoming webhook;
	// Mattermost, Rocket.Chat and others accept the same body.
	NotifySlack NotificationType = "slack"
	// NotifyWebhook posts the event as JSON with the rendered text added
	// under "text", for scripts and alert routers.
	NotifyWebhook NotificationType = "webhook"
)

// Default notification templates, by sink type. A template sees one
// events.Event; see Notification.Template.
const (
	DefaultSlackTemplate   = "*{{.App}}* {{.Type}}{{with .Service}} {{.}}{{end}}{{with .Revision}} at `{{trunc 12 .}}`{{end}}{{with .Message}}: {{.}}{{end}}"
	DefaultWebhookTemplate = "{{.App}} {{.Type}}{{with .Service}} {{.}}{{end}}{{with .Revision}} at {{trunc 12 .}}{{end}}{{with .Message}}: {{.}}{{end}}"
)

// DefaultTemplate returns the template a sink of type t uses when it names
// none, or "" for an unknown type.
func (t NotificationType) DefaultTemplate() string {
	switch t {
	case NotifySlack:
		return DefaultSlackTemplate
	case NotifyWebhook:
		return DefaultWebhookTemplate
	}
	return ""
}

// NotificationEvents returns every event type a sink can receive, in a new
// slice: what the controller publishes, without the stream's own markers.
// It is the default of Notification.Events.
func NotificationEvents() []events.Type {
	return []events.Type{
		events.SyncStarted, events.SyncSucceeded, events.SyncFailed,
		events.DriftDetected, events.DriftCorrected, events.OutOfBandChange,
		events.HealthChanged, events.Pruned, events.HookRan, events.RolledBack, events.RolloutStep,
		events.ImageCommitted, events.ImageProposed, events.ImageHeld,
	}
}

// Notification is one place the controller reports events to, such as a
// chat channel. Its URL is a credential (a Slack webhook's path is its
// token), so the file only says where to read it.
type Notification struct {
	// Name identifies the sink in logs: the same rule as an application's
	// name, unique among notifications. Required.
	Name string `yaml:"name"`
	// Type is "slack" or "webhook". Required.
	Type NotificationType `yaml:"type"`
	// URLFile is the absolute path of a file holding the URL (surrounding
	// whitespace ignored), typically a swarm secret. It is read at every
	// delivery, so a rotated URL needs no restart. Exactly one of URLFile
	// and URLEnv is required.
	URLFile string `yaml:"urlFile,omitempty"`
	// URLEnv names the controller's environment variable holding the URL.
	URLEnv string `yaml:"urlEnv,omitempty"`
	// Events lists the types sent: sync.started, sync.succeeded,
	// sync.failed, drift.detected, drift.corrected, outofband.change,
	// health.changed, pruned. Default: all of them (NotificationEvents).
	Events []events.Type `yaml:"events,omitempty"`
	// Services adds per-service progress to health.changed, which otherwise
	// means only an application's rolled-up health: a rollout publishes
	// progress for every task that moves, too much for a chat channel.
	// Requires health.changed in Events. Default false.
	Services bool `yaml:"services,omitempty"`
	// Applications limits the sink to the events of these applications of
	// this file. Default: all applications.
	Applications []string `yaml:"applications,omitempty"`
	// Template is a Go text/template rendered with the event (.Type, .App,
	// .Stack, .Service, .Revision, .Message, .Time, .ID, .Data) and the
	// functions upper, lower, trunc N and default D, besides the builtins.
	// For slack the event's text fields arrive with &, < and > escaped, so
	// a message cannot mention a channel or forge a link. Default:
	// DefaultSlackTemplate or DefaultWebhookTemplate, by Type.
	Template string `yaml:"template,omitempty"`
	// Headers are added to every request of a webhook sink; slack takes
	// none. Names are unique; credentials (Authorization, Cookie) and the
	// headers the sink sets itself (Content-Type, Content-Length, Host) are
	// refused. Default: none.
	Headers []Header `yaml:"headers,omitempty"`
}

// Header is one HTTP request header. Headers are a list of name/value
// entries rather than a mapping: the file has no free-form keys, so every
// key in it stays checkable.
type Header struct {
	// Name is an HTTP header name. Required.
	Name string `yaml:"name"`
	// Value is sent as written. Required.
	Value string `yaml:"value"`
}
