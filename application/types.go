// Package application defines the applications file: what each application
// deploys, from where, and how it is kept in sync. It parses strictly (an
// unknown key is an error with its line), applies defaults in one place, and
// validates every field before the controller acts on any of it.
//
// In a reconcile pass it is the input: each Application becomes one loop.
package application

import "time"

// APIVersion is the only applications file version this build reads.
const APIVersion = "flotilla/v1"

// Defaults and bounds applied by Defaults and checked by Validate.
const (
	DefaultInterval = 3 * time.Minute
	MinInterval     = 10 * time.Second
	DefaultHistory  = 10
	DefaultRetainRotated = 2
)

// File is a whole applications file.
type File struct {
	APIVersion   string        `yaml:"apiVersion"`
	Applications []Application `yaml:"applications"`
}

// Application is one git source deployed to one stack.
type Application struct {
	// Name identifies the application: [a-z0-9][a-z0-9-]*, unique in a file.
	Name string `yaml:"name"`
	// Source says where the manifest comes from.
	Source Source `yaml:"source"`
	// Stack is the swarm namespace. Default: Name.
	Stack string `yaml:"stack,omitempty"`
	// SyncPolicy says when and how the application is applied.
	SyncPolicy SyncPolicy `yaml:"syncPolicy,omitempty"`
	// Allow lists what the stack may reach outside its namespace.
	Allow Allow `yaml:"allow,omitempty"`
	// Adopt lets the application take over a namespace that already holds
	// services no record accounts for. Default false.
	Adopt bool `yaml:"adopt,omitempty"`
	// History is how many revision records are kept. Default 10.
	History int `yaml:"history,omitempty"`
}

// Source is a directory at a revision of a git repository.
type Source struct {
	// RepoURL is https://…, ssh://…, git@host:path, file://… or a local path.
	RepoURL string `yaml:"repoURL"`
	// Revision is a branch, tag or full commit SHA. Default "HEAD".
	Revision string `yaml:"revision,omitempty"`
	// Path is the directory inside the repository. Default ".".
	Path string `yaml:"path,omitempty"`
	// Compose lists the compose files to merge. Default [docker-compose.yml].
	Compose Compose `yaml:"compose,omitempty"`
	// Credentials names files holding git credentials; never the secrets
	// themselves.
	Credentials *Credentials `yaml:"credentials,omitempty"`
}

// Compose names the compose files and env files of a source, relative to
// Source.Path.
type Compose struct {
	// Files are merged in order, like repeated -c.
	Files []string `yaml:"files,omitempty"`
	// EnvFiles feed interpolation; the controller's own environment never does.
	EnvFiles []string `yaml:"envFiles,omitempty"`
}

// Credentials points at files that authenticate git. Each path may also come
// from the environment variable named in the matching *Env field.
type Credentials struct {
	// UsernameFile and PasswordFile give HTTPS basic auth; a token goes in
	// PasswordFile with any non-empty username (default "git").
	UsernameFile string `yaml:"usernameFile,omitempty"`
	PasswordFile string `yaml:"passwordFile,omitempty"`
	// SSHKeyFile is a private key; KnownHostsFile pins host keys (required
	// with SSHKeyFile).
	SSHKeyFile     string `yaml:"sshKeyFile,omitempty"`
	KnownHostsFile string `yaml:"knownHostsFile,omitempty"`
}

// SyncPolicy says whether changes apply by themselves and how often to look.
type SyncPolicy struct {
	// Automated, when present, applies every change. Absent means manual:
	// plan and report, apply only on an explicit sync.
	Automated *Automated `yaml:"automated,omitempty"`
	// Interval between passes. Default 3m, minimum 10s.
	Interval Duration `yaml:"interval,omitempty"`
	// RetainRotated is how many superseded configs/secrets the sweep keeps.
	// Default 2.
	RetainRotated *int `yaml:"retainRotated,omitempty"`
	// Wait makes a sync wait for convergence.
	Wait *Wait `yaml:"wait,omitempty"`
}

// Automated holds the options of an automated application.
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
	Timeout Duration `yaml:"timeout,omitempty"`
}

// Duration is a time.Duration written as "3m" in YAML.
type Duration struct{ time.Duration }
