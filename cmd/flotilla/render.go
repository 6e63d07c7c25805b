package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/sopsage"
)

// renderOptions are the flags of `flotilla render`.
type renderOptions struct {
	// Path is the compose project directory. Default ".".
	Path string
	// Root is the directory no file may be read outside of, as the
	// repository checkout is for the controller. Default: Path.
	Root string
	// Files are compose files relative to Path, merged in order. Default:
	// the first of compose.yaml, compose.yml, docker-compose.yml,
	// docker-compose.yaml that exists.
	Files []string
	// EnvFiles feed interpolation, relative to Path; later files win.
	EnvFiles []string
	// Stack names the stack objects are scoped to. Default: the base name
	// of Path.
	Stack string
	// Output is "yaml" (default) or "json" for the swarm objects.
	Output string
	// SOPSKeyFile holds age identities for SOPS-encrypted files. Without
	// one, encrypted files are refused.
	SOPSKeyFile string
	// APIVersion is the engine API version ("1.41") the services are
	// checked against: each field it cannot carry is named in a warning.
	// Default: the version negotiated with the Docker daemon the
	// environment points at (DOCKER_HOST), or compose.MinAPIVersion when
	// none answers.
	APIVersion string
	// Chart options, for a --path that holds Chart.yaml or is a packaged
	// chart, or a chart from --repo: see render_chart.go.
	chartFlags
	// stackDefaulted: no --stack was given, and a packaged or repository
	// chart is named for the chart instead of the file.
	stackDefaulted bool
}

func newRenderCmd() *cobra.Command {
	var opts renderOptions
	cmd := &cobra.Command{
		Use:   "render [--path DIR] [-f FILE]... [--env-file FILE]... [--values FILE]... [--set KEY=VALUE]... [--stack NAME]",
		Short: "Print the manifest and swarm objects a compose project or a chart deploys",
		Long: `Render loads a compose project exactly as the controller does — only the
given env files feed interpolation, no file outside --root is read — and prints
the manifest followed by the swarm objects it would deploy: services with their
specs, networks, configs, and the names of secrets (never their content).
It needs no controller and no swarm. Exit 0 on success, 1 when the project is
invalid, 2 on misuse.

A --path holding Chart.yaml is rendered as a chart: values.yaml, then each
--values file in order (relative to the chart), each --extra-values file,
then each --set (dotted keys, highest precedence). A --path that is a .tgz
is rendered as a packaged chart, and --repo URL --chart NAME [--version C]
renders the newest matching version from a chart repository (from the chart
cache when the repository cannot be reached).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if code := runRender(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != exitOK {
				return exitError{code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Path, "path", ".", "compose project directory")
	f.StringVar(&opts.Root, "root", "", "directory no file may be read outside of (default: --path)")
	f.StringArrayVarP(&opts.Files, "file", "f", nil, "compose file relative to --path (repeatable, merged in order)")
	f.StringArrayVar(&opts.EnvFiles, "env-file", nil, "interpolation env file relative to --path (repeatable)")
	f.StringVar(&opts.Stack, "stack", "", "stack name (default: base name of --path)")
	f.StringVarP(&opts.Output, "output", "o", "yaml", "format of the swarm objects: yaml or json")
	f.StringVar(&opts.APIVersion, "api-version", "", "engine API version to check fields against (default: the connected daemon's, else "+compose.MinAPIVersion+")")
	f.StringVar(&opts.SOPSKeyFile, "sops-age-key-file", os.Getenv("FLOTILLA_SOPS_AGE_KEY_FILE"), "age identities that decrypt SOPS-encrypted files (also FLOTILLA_SOPS_AGE_KEY_FILE)")
	opts.chartFlags.add(f)
	return cmd
}

// runRender renders opts and returns the exit code. The manifest and the
// objects go to stdout as two YAML documents (or the manifest and a JSON
// object); warnings and problems go to stderr.
func runRender(ctx context.Context, opts renderOptions, stdout, stderr io.Writer) int {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Output != "yaml" && opts.Output != "json" {
		fmt.Fprintf(stderr, "flotilla render: --output must be yaml or json, not %q\n", opts.Output)
		return exitMisuse
	}
	if opts.APIVersion != "" && !apiVersionRE.MatchString(opts.APIVersion) {
		fmt.Fprintf(stderr, "flotilla render: --api-version must look like 1.41, not %q\n", opts.APIVersion)
		return exitMisuse
	}
	dir, err := renderDir(opts)
	if err != nil {
		fmt.Fprintln(stderr, "flotilla render:", err)
		return exitMisuse
	}
	var apiNote string
	dir.APIVersion, apiNote = renderAPIVersion(ctx, opts.APIVersion)
	stack := opts.Stack
	if stack == "" {
		abs, err := filepath.Abs(opts.Path)
		if err != nil {
			fmt.Fprintln(stderr, "flotilla render:", err)
			return exitMisuse
		}
		stack, opts.stackDefaulted = filepath.Base(abs), opts.Repo != "" || isArchive(opts.Path)
	}

	if opts.SOPSKeyFile != "" {
		ids, err := sopsage.ReadIdentityFile(opts.SOPSKeyFile)
		if err != nil {
			fmt.Fprintln(stderr, "flotilla render: --sops-age-key-file:", err)
			return exitFailed
		}
		dir.Decrypt, dir.SealKey = ids.Decrypt, ids.SealKey()
	}
	r, stack, err := renderProject(ctx, stack, dir, opts, stderr)
	if err != nil && isUsageError(err) {
		fmt.Fprintln(stderr, "flotilla render:", err)
		return exitMisuse
	}
	if err != nil {
		fmt.Fprintln(stderr, formatProblem(err))
		return exitFailed
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if len(r.Warnings) > 0 && apiNote != "" {
		fmt.Fprintln(stderr, "note:", apiNote)
	}
	st, err := compose.Convert(ctx, r.Manifest, stack, nil)
	if err != nil {
		fmt.Fprintln(stderr, "flotilla render:", err)
		return exitFailed
	}
	objects, err := formatObjects(st, opts.Output)
	if err != nil {
		fmt.Fprintln(stderr, "flotilla render:", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "# manifest of stack %s\n%s", stack, r.Manifest)
	if opts.Output == "yaml" {
		fmt.Fprintf(stdout, "---\n# swarm objects of stack %s\n", stack)
	}
	if _, err := stdout.Write(objects); err != nil {
		return exitFailed
	}
	return exitOK
}

var apiVersionRE = regexp.MustCompile(`^1\.[0-9]+$`)

// renderAPIVersion is the engine API version a render is checked against:
// the declared one, else the one negotiated with the daemon the environment
// names, else the oldest Flotilla deploys to. The note says which, when it
// was not declared.
func renderAPIVersion(ctx context.Context, declared string) (version, note string) {
	if declared != "" {
		return declared, ""
	}
	fallback := "no Docker daemon answered, so fields were checked against engine API " + compose.MinAPIVersion +
		", the oldest Flotilla deploys to; --api-version checks another"
	c, err := client.New(client.FromEnv)
	if err != nil {
		return compose.MinAPIVersion, fallback
	}
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := c.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return compose.MinAPIVersion, fallback
	}
	return c.ClientVersion(), "fields were checked against engine API " + c.ClientVersion() + " of the daemon at " + c.DaemonHost()
}

// renderDir maps the flags onto a compose.Dir: --root is the containment
// boundary and --path the project inside it.
func renderDir(opts renderOptions) (compose.Dir, error) {
	root := opts.Root
	if root == "" {
		root = opts.Path
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return compose.Dir{}, err
	}
	absPath, err := filepath.Abs(opts.Path)
	if err != nil {
		return compose.Dir{}, err
	}
	rel, err := filepath.Rel(absRoot, absPath)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return compose.Dir{}, errors.New("--path must be inside --root")
	}
	return compose.Dir{Root: absRoot, Path: rel, Files: opts.Files, EnvFiles: opts.EnvFiles}, nil
}

// renderedObjects is what render prints of a compose.Stack: the objects a
// deploy writes, in the swarm API's own field names. Secrets are listed by
// name with their labels; Convert never fills their data. Config data is
// shown as text, or base64 when it is not UTF-8.
type renderedObjects struct {
	Services         any      `json:"services"`
	Networks         any      `json:"networks,omitempty"`
	ExternalNetworks []string `json:"externalNetworks,omitempty"`
	Configs          any      `json:"configs,omitempty"`
	ExternalConfigs  []string `json:"externalConfigs,omitempty"`
	Secrets          any      `json:"secrets,omitempty"`
	ExternalSecrets  []string `json:"externalSecrets,omitempty"`
	Volumes          []string `json:"volumes,omitempty"`
	ExternalVolumes  []string `json:"externalVolumes,omitempty"`
}

func formatObjects(st *compose.Stack, format string) ([]byte, error) {
	secrets := map[string]any{}
	for name, s := range st.Secrets {
		secrets[name] = map[string]any{"labels": s.Labels}
	}
	configs := map[string]any{}
	for name, c := range st.Configs {
		if utf8.Valid(c.Data) {
			configs[name] = map[string]any{"labels": c.Labels, "data": string(c.Data)}
		} else {
			configs[name] = map[string]any{"labels": c.Labels, "base64": c.Data}
		}
	}
	obj := renderedObjects{
		Services:         st.Services,
		ExternalNetworks: st.ExternalNetworks,
		ExternalConfigs:  st.ExternalConfigs,
		ExternalSecrets:  st.ExternalSecrets,
		Volumes:          st.Volumes,
		ExternalVolumes:  st.ExternalVolumes,
	}
	if len(st.Networks) > 0 {
		obj.Networks = st.Networks
	}
	if len(configs) > 0 {
		obj.Configs = configs
	}
	if len(secrets) > 0 {
		obj.Secrets = secrets
	}
	js, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode objects: %w", err)
	}
	if format == "json" {
		return append(js, '\n'), nil
	}
	return jsonToYAML(js)
}

// jsonToYAML re-encodes JSON as block-style YAML, keeping its key order:
// the swarm types carry JSON names only, and these are the names the
// Docker API and `docker service inspect` show.
func jsonToYAML(js []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(js, &n); err != nil {
		return nil, fmt.Errorf("encode objects: %w", err)
	}
	blockStyle(&n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("encode objects: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode objects: %w", err)
	}
	return b.Bytes(), nil
}

func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = 0
	}
	if n.Kind == yaml.ScalarNode && n.Style == yaml.DoubleQuotedStyle && n.Tag == "!!str" {
		// Let the encoder quote only where YAML needs it.
		n.Style = 0
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}
