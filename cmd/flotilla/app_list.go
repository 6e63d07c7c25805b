package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/client"
)

// appListOptions are the flags of `flotilla app list`.
type appListOptions struct {
	*apiOptions
}

func newAppListCmd(parent *apiOptions) *cobra.Command {
	o := appListOptions{parent}
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List applications with their sync, health and revision",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPI(cmd, o.apiOptions, requestTimeout, func(ctx context.Context, c *client.Client) error {
				return runAppList(ctx, c, o, cmd.OutOrStdout())
			})
		},
	}
}

func runAppList(ctx context.Context, c *client.Client, o appListOptions, w io.Writer) error {
	list, err := c.Applications(ctx)
	if err != nil {
		return fmt.Errorf("list applications: %w", err)
	}
	if o.Output != outputTable {
		return printObject(w, o.Output, list)
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintln(w, "no applications")
		return err
	}
	return printAppTable(w, list.Items, time.Now())
}

// printAppTable writes one row per application. REVISION is what runs;
// when the controller has seen a newer commit it failed to apply (or a
// manual application waits for), that commit follows the arrow.
func printAppTable(w io.Writer, items []api.ApplicationSummary, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tSWARM\tSYNC\tHEALTH\tREVISION\tSERVICES\tLAST SYNC\tMESSAGE")
	for _, a := range items {
		sync := string(a.Sync)
		if a.SyncReason != "" {
			sync += " (" + string(a.SyncReason) + ")"
		}
		rev := shortSHA(a.Revision)
		if a.SeenRevision != "" && a.SeenRevision != a.Revision {
			rev += " → " + shortSHA(a.SeenRevision)
		}
		msg := a.LastError
		if a.Waiting != "" {
			// Held by a dependency or a sync window: the marker says the
			// sync is pending on purpose, the message says until when.
			sync += ", held"
			if msg == "" {
				msg = a.Waiting
			}
		}
		if msg == "" {
			msg = a.HealthMessage
		}
		swarm := a.Destination
		if swarm == "" {
			swarm = "local"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", a.Name, swarm, sync, a.Health, rev,
			a.ServicesHealthy, a.ServiceCount, ago(now, a.LastSyncTime), oneLine(msg, 60))
	}
	return tw.Flush()
}
