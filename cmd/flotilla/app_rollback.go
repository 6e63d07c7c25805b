package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/api"
	"github.com/flotilla-gitops/flotilla/client"
)

// appRollbackOptions are the flags of `flotilla app rollback`.
type appRollbackOptions struct {
	*apiOptions
	Name     string
	Revision int
	waitOptions
}

func newAppRollbackCmd(parent *apiOptions) *cobra.Command {
	o := appRollbackOptions{apiOptions: parent}
	cmd := &cobra.Command{
		Use:   "rollback NAME REVISION",
		Short: "Redeploy a recorded revision (see app history)",
		Long: `Rollback redeploys the manifest recorded as REVISION (a release number from
'flotilla app history NAME'). An automated application then stays on it until a
new commit arrives or the rollback is cleared, and its status says so.`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeAppNames(parent),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			rev, err := strconv.Atoi(args[1])
			if err != nil || rev < 1 {
				return usageError{fmt.Errorf("REVISION %q is not a release number; `flotilla app history %s` lists them", args[1], args[0])}
			}
			o.Revision = rev
			if o.Timeout <= 0 {
				return usageError{errors.New("--timeout must be positive")}
			}
			return runAPI(cmd, o.apiOptions, o.Timeout+waitMargin, func(ctx context.Context, c *client.Client) error {
				return runAppRollback(ctx, c, o, cmd.OutOrStdout(), isTerminal(cmd.OutOrStdout()))
			})
		},
	}
	o.waitOptions.addFlags(cmd)
	return cmd
}

func runAppRollback(ctx context.Context, c *client.Client, o appRollbackOptions, w io.Writer, tty bool) error {
	return runOperation(ctx, c, apiOperation{
		app: o.Name, verb: fmt.Sprintf("rollback to release %d", o.Revision), output: o.Output, wait: o.waitOptions, tty: tty,
		call: func(ctx context.Context, wait client.Wait) (api.OperationResponse, error) {
			return c.Rollback(ctx, o.Name, o.Revision, wait)
		},
	}, w)
}
