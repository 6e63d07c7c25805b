package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/imagewrite"
	"github.com/flotilla-gitops/flotilla/regauth"
	"github.com/flotilla-gitops/flotilla/registryclient"
)

// defaultImagePlanTimeout bounds a whole plan: clones and registry
// queries of every application.
const defaultImagePlanTimeout = 5 * time.Minute

// imagePlanOptions are the flags of `flotilla image plan`.
type imagePlanOptions struct {
	// File is the applications file.
	File string
	// App limits the plan to one application. Default: every application
	// with imageUpdates.
	App string
	// PlainHTTP lists registries (host:port) spoken to over plain HTTP
	// besides loopback ones.
	PlainHTTP []string
	// Timeout bounds the whole plan.
	Timeout time.Duration
}

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Image automation: new tags and digests written back to git",
	}
	var opts imagePlanOptions
	plan := &cobra.Command{
		Use:   "plan -f applications.yaml [--app NAME]",
		Short: "Show the image updates the controller would commit, without writing",
		Long: `Plan runs each application's imageUpdates policies as the controller would:
it clones the branch, asks the registries (with the application's
registryAuth), decides, and rewrites the marked fields in a scratch
checkout, then prints every marked field with its current and next value
and the commit message that would be pushed. Nothing is committed or
pushed. Registries are queried once per image.

It exits 0 when nothing would be committed, 2 when a commit would be made,
and 1 when an application could not be planned.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if code := runImagePlan(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != exitOK {
				return exitError{code}
			}
			return nil
		},
	}
	plan.Flags().StringVarP(&opts.File, "file", "f", "", "applications file")
	plan.Flags().StringVar(&opts.App, "app", "", "plan only this application")
	plan.Flags().StringSliceVar(&opts.PlainHTTP, "plain-http", nil, "registries (host:port) to speak plain HTTP to; loopback registries always are")
	plan.Flags().DurationVar(&opts.Timeout, "timeout", defaultImagePlanTimeout, "deadline of the whole plan")
	cmd.AddCommand(plan)
	return cmd
}

// runImagePlan prints the plan to stdout and problems to stderr, and
// returns the exit code.
func runImagePlan(ctx context.Context, opts imagePlanOptions, stdout, stderr io.Writer) int {
	if ctx == nil {
		ctx = context.Background()
	}
	// The plan prints what repositories and registries wrote (current
	// values, tags, reasons, errors from a git remote): none of it may
	// drive the terminal.
	stdout, stderr = termSafeWriter{stdout}, termSafeWriter{stderr}
	if opts.File == "" {
		fmt.Fprintln(stderr, "flotilla image plan: -f applications file is required")
		return exitMisuse
	}
	f, err := application.Load(opts.File)
	if err != nil {
		for _, e := range flatten(err) {
			fmt.Fprintln(stderr, formatProblem(e))
		}
		return exitFailed
	}
	var apps []*application.Application
	for i := range f.Applications {
		a := &f.Applications[i]
		if a.ImageUpdates != nil && (opts.App == "" || a.Name == opts.App) {
			apps = append(apps, a)
		}
	}
	if len(apps) == 0 {
		if opts.App != "" {
			fmt.Fprintf(stderr, "flotilla image plan: application %q has no imageUpdates in %s\n", opts.App, opts.File)
			return exitFailed
		}
		fmt.Fprintf(stdout, "%s: no application has imageUpdates\n", opts.File)
		return exitOK
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	u := &imagewrite.Updater{Registry: registryclient.New(registryclient.Options{PlainHTTP: opts.PlainHTTP})}
	code := exitOK
	for _, a := range apps {
		var creds regauth.Resolver
		if ra := a.RegistryAuth; ra != nil {
			c, err := regauth.FromFile(ra.Path())
			if err != nil {
				fmt.Fprintf(stderr, "application %s: registryAuth: %v\n", a.Name, err)
				code = exitFailed
				continue
			}
			creds = c
		}
		res, err := u.Run(ctx, a, creds, true)
		if err != nil {
			fmt.Fprintf(stderr, "%v\n", err)
			code = exitFailed
			continue
		}
		printImagePlan(stdout, a, res)
		if len(res.Updates()) > 0 && code == exitOK {
			code = exitChanges
		}
	}
	return code
}

// printImagePlan writes one application's plan: a row per marked field and
// the commit message. A row's cells are one line each (a value with a line
// break cannot add a row of its own); w is expected to be terminal-safe.
func printImagePlan(w io.Writer, a *application.Application, res imagewrite.Result) {
	base := res.Commit.Base
	if len(base) > 12 {
		base = base[:12]
	}
	fmt.Fprintf(w, "application %s: branch %s at %s\n", a.Name, a.ImageUpdates.Branch, base)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  FILE\tFIELD\tCURRENT\tNEXT\tOUTCOME")
	for _, t := range res.Targets {
		next, outcome := t.New, string(t.Outcome)
		switch {
		case t.Err != nil:
			next, outcome = "-", "error: "+t.Err.Error()
		case t.Reason != "":
			outcome += ": " + t.Reason
		}
		if next == t.Old {
			next = "="
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", planCell(t.File), planCell(t.Field), planCell(t.Old), planCell(next), planCell(outcome))
	}
	tw.Flush()
	if res.Commit.Message == "" {
		fmt.Fprintln(w, "  nothing to commit")
		return
	}
	files := strings.Join(slices.Sorted(slices.Values(res.Commit.Files)), ", ")
	if pr := a.ImageUpdates.PullRequest; pr != nil {
		// The plan does not ask the forge; the controller opens or edits
		// the pull request.
		fmt.Fprintf(w, "  would propose %s on branch %s, in a pull request into %s:\n", files, pr.HeadBranch(a.Name), a.ImageUpdates.Branch)
	} else {
		fmt.Fprintf(w, "  would commit %s:\n", files)
	}
	for line := range strings.SplitSeq(strings.TrimRight(res.Commit.Message, "\n"), "\n") {
		if line == "" {
			fmt.Fprintln(w)
			continue
		}
		fmt.Fprintf(w, "    %s\n", line)
	}
}

// planCell is s on one line, control characters replaced, long enough for
// a reference with its digest and a registry's error.
func planCell(s string) string {
	return oneLine(termSafe(s), 200)
}
