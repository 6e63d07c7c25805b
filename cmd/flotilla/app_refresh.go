package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/client"
)

// appRefreshOptions are the flags of `flotilla app refresh`.
type appRefreshOptions struct {
	*apiOptions
	Name string
}

func newAppRefreshCmd(parent *apiOptions) *cobra.Command {
	o := appRefreshOptions{apiOptions: parent}
	return &cobra.Command{
		Use:   "refresh NAME",
		Short: "Fetch and plan now instead of at the next interval",
		Long: `Refresh makes the application due at once: the controller fetches its
repository and plans. An automated application then applies as usual; a manual
one is only planned and reported (use sync to apply it).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAppNames(parent),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return runAPI(cmd, o.apiOptions, requestTimeout, func(ctx context.Context, c *client.Client) error {
				return runAppRefresh(ctx, c, o, cmd.OutOrStdout())
			})
		},
	}
}

func runAppRefresh(ctx context.Context, c *client.Client, o appRefreshOptions, w io.Writer) error {
	r, err := c.Refresh(ctx, o.Name)
	if err != nil {
		return fmt.Errorf("refresh %s: %w", o.Name, err)
	}
	if o.Output != outputTable {
		return printObject(w, o.Output, r)
	}
	_, err = fmt.Fprintf(w, "%s: refresh queued\n", o.Name)
	return err
}
