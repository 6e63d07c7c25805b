package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/client"
)

// appLogsOptions are the flags of `flotilla app logs`.
type appLogsOptions struct {
	*apiOptions
	Name string
	api.LogOptions
}

func newAppLogsCmd(parent *apiOptions) *cobra.Command {
	o := appLogsOptions{apiOptions: parent}
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print what the application's tasks write, or follow it",
		Long: `Logs prints the last lines each service of the application's stack wrote,
read by the controller from the swarm, prefixed with the service and task. With
--follow it keeps printing new lines until interrupted. Needs the operator role.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAppNames(parent),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			c, err := o.newClient()
			if err != nil {
				return err
			}
			// Following lasts until interrupted; a plain read is bounded.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if !o.Follow {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, requestTimeout)
				defer cancel()
			}
			return runAppLogs(ctx, c, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Service, "service", "", "only this service (its name in the compose file)")
	f.StringVar(&o.Task, "task", "", "only this task (its id)")
	f.IntVarP(&o.Tail, "tail", "n", api.DefaultLogTail, fmt.Sprintf("last lines per service to start with (at most %d)", api.MaxLogTail))
	f.BoolVarP(&o.Follow, "follow", "f", false, "keep printing new lines until interrupted")
	f.BoolVarP(&o.Timestamps, "timestamps", "t", false, "print each line's time")
	return cmd
}

func runAppLogs(ctx context.Context, c *client.Client, o appLogsOptions, w io.Writer) error {
	err := c.Logs(ctx, o.Name, o.LogOptions, func(l api.LogLine) error {
		if o.Output != outputTable {
			return printLogJSON(w, l)
		}
		task := l.Task
		if len(task) > 12 {
			task = task[:12]
		}
		prefix := l.Service + "." + task
		if l.Time != "" {
			prefix = l.Time + " " + prefix
		}
		_, err := fmt.Fprintf(w, "%s | %s\n", prefix, l.Text)
		return err
	})
	if err != nil && ctx.Err() != nil && o.Follow {
		return nil // interrupted while following: the normal way to stop
	}
	if err != nil {
		return fmt.Errorf("logs %s: %w", o.Name, err)
	}
	return nil
}

// printLogJSON writes one line as one JSON object: a stream of lines is not
// one document, so -o json and -o yaml both print newline-delimited JSON.
func printLogJSON(w io.Writer, l api.LogLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
