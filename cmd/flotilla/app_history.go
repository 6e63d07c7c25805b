package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/client"
)

// appHistoryOptions are the flags of `flotilla app history`.
type appHistoryOptions struct {
	*apiOptions
	Name string
}

func newAppHistoryCmd(parent *apiOptions) *cobra.Command {
	o := appHistoryOptions{apiOptions: parent}
	return &cobra.Command{
		Use:               "history NAME",
		Short:             "List the revisions recorded in the swarm, newest first",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAppNames(parent),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return runAPI(cmd, o.apiOptions, requestTimeout, func(ctx context.Context, c *client.Client) error {
				return runAppHistory(ctx, c, o, cmd.OutOrStdout())
			})
		},
	}
}

func runAppHistory(ctx context.Context, c *client.Client, o appHistoryOptions, w io.Writer) error {
	h, err := c.History(ctx, o.Name)
	if err != nil {
		return fmt.Errorf("history of %s: %w", o.Name, err)
	}
	if o.Output != outputTable {
		return printObject(w, o.Output, h)
	}
	if len(h.Items) == 0 {
		_, err := fmt.Fprintf(w, "%s has no recorded revisions yet\n", o.Name)
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "REVISION\tCOMMIT\tCHART\tDEPLOYED\tTRIGGER\tAUTHOR\tMESSAGE")
	for _, r := range h.Items {
		when := "-"
		if !r.Time.IsZero() {
			when = r.Time.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Revision, shortSHA(r.Commit), chartCell(r.Chart), when,
			orDash(r.Trigger), orDash(oneLine(r.Author, 30)), oneLine(r.Message, 60))
	}
	return tw.Flush()
}

// chartCell shows a revision's chart as NAME-VERSION and the start of its
// values digest (and the values repository's commit, if any), or "-" for
// a compose revision.
func chartCell(c *charts.ChartRef) string {
	if c == nil {
		return "-"
	}
	d := strings.TrimPrefix(c.ValuesDigest, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	if c.ValuesCommit != "" {
		d += " from " + shortSHA(c.ValuesCommit)
	}
	return c.Name + "-" + c.Version + " (values " + d + ")"
}

// orDash shows "-" for an empty table cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
