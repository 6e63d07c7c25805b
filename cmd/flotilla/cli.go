package main

// Helpers shared by the commands that talk to a running controller through
// its API (app …, status): where the server is, the token, output formats.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/client"
)

// Environment the API commands read. The token is never a flag: argv is
// visible to every user of the machine.
const (
	envServer    = "FLOTILLA_SERVER"
	envToken     = "FLOTILLA_TOKEN"
	envTokenFile = "FLOTILLA_TOKEN_FILE"

	defaultServer = "http://127.0.0.1:8080"
)

// Output formats.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// apiOptions are the flags every API command shares.
type apiOptions struct {
	// Server is the controller's base URL (--server, FLOTILLA_SERVER).
	Server string
	// Output is table (default), json or yaml.
	Output string
	// CredentialsFile holds the logins of `flotilla login`, used when the
	// environment gives no token (--credentials-file).
	CredentialsFile string
}

func (o *apiOptions) addFlags(fs *pflag.FlagSet) {
	server := os.Getenv(envServer)
	if server == "" {
		server = defaultServer
	}
	fs.StringVar(&o.Server, "server", server, "controller API URL (env "+envServer+")")
	fs.StringVarP(&o.Output, "output", "o", outputTable, "output format: table, json or yaml")
	fs.StringVar(&o.CredentialsFile, "credentials-file", defaultCredentialsFile(), "where flotilla login keeps its logins (env "+envCredentialsFile+"); used when no token is set")
}

func (o *apiOptions) validate() error {
	switch o.Output {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return usageError{fmt.Errorf("--output %q: use table, json or yaml", o.Output)}
}

// newClient validates o and returns a client with the token from the
// environment, or else the login stored by `flotilla login` for the server.
func (o *apiOptions) newClient() (*client.Client, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	token, err := tokenFromEnv(os.Getenv, os.ReadFile)
	if err != nil {
		return nil, err
	}
	loggedIn := false
	if token == "" {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		t, err := loginToken(ctx, o.CredentialsFile, o.Server, time.Now())
		switch {
		case err == nil:
			token, loggedIn = t, true
		case !errors.Is(err, errNoLogin):
			return nil, err
		}
	}
	c, err := client.New(o.Server, token, nil)
	if err != nil {
		return nil, usageError{fmt.Errorf("--server: %w", err)}
	}
	if loggedIn {
		// The stored login expired or was revoked since it was renewed.
		c.SetUnauthorizedHint("run flotilla login")
	}
	return c, nil
}

// tokenFromEnv reads FLOTILLA_TOKEN_FILE or FLOTILLA_TOKEN; no token is not
// an error here, the server says whether it needs one.
func tokenFromEnv(getenv func(string) string, readFile func(string) ([]byte, error)) (string, error) {
	value, file := getenv(envToken), getenv(envTokenFile)
	switch {
	case value != "" && file != "":
		return "", usageError{fmt.Errorf("both %s and %s are set; unset one", envToken, envTokenFile)}
	case file != "":
		b, err := readFile(file)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", envTokenFile, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return strings.TrimSpace(value), nil
}

// runAPI runs fn with a client built from o and a context bounded by
// timeout, so a hung controller cannot hang the terminal.
func runAPI(cmd *cobra.Command, o *apiOptions, timeout time.Duration, fn func(ctx context.Context, c *client.Client) error) error {
	c, err := o.newClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	if o.Output == outputTable {
		// Tables show what repositories, registries and tasks wrote
		// (reasons, messages, log lines, tags): none of it may drive the
		// terminal. JSON and YAML escape control characters themselves.
		cmd.SetOut(termSafeWriter{cmd.OutOrStdout()})
	}
	return fn(ctx, c)
}

// termSafeWriter passes what is written through termSafe.
type termSafeWriter struct{ w io.Writer }

func (t termSafeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, termSafe(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// requestTimeout bounds one plain API call from the CLI.
const requestTimeout = 30 * time.Second

// printObject writes v as JSON or YAML in the API's own field names. YAML is
// made from the JSON, so both show the same keys in the same order.
func printObject(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	if format == outputJSON {
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("encode output as yaml: %w", err)
	}
	cliYAMLStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return fmt.Errorf("encode output as yaml: %w", err)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// cliYAMLStyle drops JSON's flow style and quoting; the encoder still quotes
// any string that would otherwise read back as another type.
func cliYAMLStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		cliYAMLStyle(c)
	}
}

// newTable returns a tabwriter for a human table; call Flush when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// shortSHA abbreviates a commit to the width people read. A chart
// repository's revision ("name@version") is shown whole: its end is what
// tells two apart.
func shortSHA(commit string) string {
	if len(commit) > 8 && !strings.Contains(commit, "@") {
		return commit[:8]
	}
	if commit == "" {
		return "-"
	}
	return commit
}

// ago renders how long before now t was, coarsely; "-" for zero.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// oneLine shortens s to n runes on a single line, for table cells.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// isTerminal reports whether w is a character device (a terminal), where
// the CLI may redraw lines; pipes and files get plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// completeAppNames offers the controller's application names for NAME
// arguments; any failure simply offers nothing.
func completeAppNames(o *apiOptions) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		_ = runAPI(cmd, o, 3*time.Second, func(ctx context.Context, c *client.Client) error {
			list, err := c.Applications(ctx)
			for _, a := range list.Items {
				names = append(names, a.Name)
			}
			return err
		})
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// errFailed ends a command whose output already explained the failure.
var errFailed = exitError{exitFailed}
