package main

import (
	"github.com/spf13/cobra"
)

// newAppCmd groups the commands that act on applications through a running
// controller's API. Each subcommand lives in its own app_*.go file.
func newAppCmd() *cobra.Command {
	o := &apiOptions{}
	cmd := &cobra.Command{
		Use:   "app",
		Short: "List, inspect, sync and roll back applications on a running controller",
		Long: `The app commands talk to a running controller over its HTTP API.

The controller is found at --server or FLOTILLA_SERVER (default ` + defaultServer + `).
The bearer token comes from FLOTILLA_TOKEN or the file named by FLOTILLA_TOKEN_FILE,
never from a flag. Output is a table for people; -o json or -o yaml prints the
API's own objects for scripts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		newAppListCmd(o),
		newAppGetCmd(o),
		newAppDiffCmd(o),
		newAppHistoryCmd(o),
		newAppSyncCmd(o),
		newAppRollbackCmd(o),
		newAppRefreshCmd(o),
		newAppRolloutCmd(o),
		newAppLogsCmd(o),
	)
	return cmd
}
