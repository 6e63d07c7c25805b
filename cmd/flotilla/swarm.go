package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/client"
)

// newSwarmCmd groups the commands about the swarms a running controller
// deploys to.
func newSwarmCmd() *cobra.Command {
	o := &apiOptions{}
	cmd := &cobra.Command{
		Use:   "swarm",
		Short: "Show the swarms a running controller deploys to",
		Long: `The swarm commands talk to a running controller over its HTTP API, found and
authenticated as for the app commands.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(newSwarmListCmd(o))
	return cmd
}

// swarmListOptions are the flags of `flotilla swarm list`.
type swarmListOptions struct {
	*apiOptions
}

func newSwarmListCmd(parent *apiOptions) *cobra.Command {
	o := swarmListOptions{parent}
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List swarms with their reachability, nodes, managers, engine, host in use and applications",
		Long: `List asks the controller to check every swarm now (each bounded by a few
seconds) and prints one row per swarm: whether a manager answered, the swarm's
node and manager counts, the engine version and host of the manager in use, and
how many applications deploy to it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAPI(cmd, o.apiOptions, requestTimeout, func(ctx context.Context, c *client.Client) error {
				return runSwarmList(ctx, c, o, cmd.OutOrStdout())
			})
		},
	}
}

func runSwarmList(ctx context.Context, c *client.Client, o swarmListOptions, w io.Writer) error {
	list, err := c.Swarms(ctx)
	if err != nil {
		return fmt.Errorf("list swarms: %w", err)
	}
	if o.Output != outputTable {
		return printObject(w, o.Output, list)
	}
	return printSwarmTable(w, list.Items)
}

// printSwarmTable writes one row per swarm; an unreachable one says why.
func printSwarmTable(w io.Writer, items []api.SwarmStatus) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tREACHABLE\tNODES\tMANAGERS\tENGINE\tHOST\tAPPS\tMESSAGE")
	for _, s := range items {
		reach := "yes"
		if !s.Reachable {
			reach = "no"
		}
		engine := s.EngineVersion
		if engine == "" {
			engine = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n", s.Name, reach, s.Nodes, s.Managers, engine, s.Host, s.Applications, oneLine(s.Error, 60))
	}
	return tw.Flush()
}
