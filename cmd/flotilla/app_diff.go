package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/client"
)

// appDiffOptions are the flags of `flotilla app diff`.
type appDiffOptions struct {
	*apiOptions
	Name string
	// Revision, when set, compares that recorded revision instead of the
	// live swarm; Against says with what (declared or deployed).
	Revision int
	Against  string
}

func newAppDiffCmd(parent *apiOptions) *cobra.Command {
	o := appDiffOptions{apiOptions: parent}
	cmd := &cobra.Command{
		Use:   "diff NAME",
		Short: "Show how the swarm differs from the repository, field by field",
		Long: `Diff shows, per service, each field whose live value differs from what the
repository declares, the text diff of the manifest, and what a prune would
remove. It exits 0 whether or not there are differences.

With --revision N it compares recorded revision N (see ` + "`flotilla app history`" + `)
instead: with what the repository declares now (--against declared, the
default) or with the newest recorded revision (--against deployed: what a
rollback to N would change).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAppNames(parent),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return runAPI(cmd, o.apiOptions, requestTimeout, func(ctx context.Context, c *client.Client) error {
				return runAppDiff(ctx, c, o, cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().IntVar(&o.Revision, "revision", 0, "compare this recorded revision instead of the live swarm")
	cmd.Flags().StringVar(&o.Against, "against", "", `with --revision: "declared" (what the repository declares now, the default) or "deployed" (the newest recorded revision)`)
	return cmd
}

// check refuses flag combinations the API would refuse, before any request.
func (o appDiffOptions) check() error {
	switch {
	case o.Revision < 0:
		return usageError{fmt.Errorf("--revision %d: want a revision number of 1 or more", o.Revision)}
	case o.Revision == 0 && o.Against != "":
		return usageError{errors.New("--against needs --revision N")}
	case o.Against != "" && o.Against != api.AgainstDeclared && o.Against != api.AgainstDeployed:
		return usageError{fmt.Errorf("--against %q: want %q or %q", o.Against, api.AgainstDeclared, api.AgainstDeployed)}
	}
	return nil
}

func runAppDiff(ctx context.Context, c *client.Client, o appDiffOptions, w io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	var (
		d   api.Diff
		err error
	)
	if o.Revision > 0 {
		if d, err = c.DiffRevision(ctx, o.Name, o.Revision, o.Against); err != nil {
			return fmt.Errorf("diff %s against revision %d: %w", o.Name, o.Revision, err)
		}
	} else if d, err = c.Diff(ctx, o.Name); err != nil {
		return fmt.Errorf("diff %s: %w", o.Name, err)
	}
	if o.Output != outputTable {
		return printObject(w, o.Output, d)
	}
	printDiff(w, d)
	return nil
}

var changeMark = map[api.ServiceChange]string{
	api.ServiceCreate:     "+",
	api.ServiceUpdate:     "~",
	api.ServiceDrift:      "!",
	api.ServiceRemove:     "-",
	api.ServiceRolledBack: "<",
	api.ServiceUpdating:   "…",
	api.ServiceNotKept:    "=",
}

func printDiff(w io.Writer, d api.Diff) {
	if d.Revision != "" || d.Deployed != "" {
		fmt.Fprintf(w, "%s: deployed %s, repository at %s\n", d.App, shortSHA(d.Deployed), shortSHA(d.Revision))
	}
	if d.Chart != nil || d.DeployedChart != nil {
		fmt.Fprintf(w, "chart: deployed %s, repository at %s\n", chartCell(d.DeployedChart), chartCell(d.Chart))
	}
	if len(d.Services) == 0 && d.Manifest == "" && len(d.PendingRemovals) == 0 {
		fmt.Fprintln(w, "no differences")
	}
	for _, s := range d.Services {
		mark := changeMark[s.Change]
		if mark == "" {
			mark = "?"
		}
		fmt.Fprintf(w, "%s %s (%s)\n", mark, s.Name, s.Change)
		tw := newTable(w)
		for _, f := range s.Fields {
			fmt.Fprintf(tw, "    %s:\tlive %s\t→ declared %s\n", f.Field, oneLine(f.Live, 60), oneLine(f.Desired, 60))
		}
		_ = tw.Flush()
	}
	for _, r := range d.PendingRemovals {
		fmt.Fprintf(w, "- %s (prune would remove)\n", r)
	}
	for _, n := range d.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, u := range d.Unavailable {
		fmt.Fprintf(w, "note: %s\n", u)
	}
	if d.Manifest != "" {
		fmt.Fprintln(w)
		fmt.Fprint(w, d.Manifest)
		if d.Manifest[len(d.Manifest)-1] != '\n' {
			fmt.Fprintln(w)
		}
	}
}
