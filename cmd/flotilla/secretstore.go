package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/client"
)

// newSecretStoreCmd groups the commands about the applications file's
// secret stores on a running controller.
func newSecretStoreCmd() *cobra.Command {
	o := &apiOptions{}
	cmd := &cobra.Command{
		Use:   "secretstore",
		Short: "Tell a running controller about changes in a secret store",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(newSecretStoreRotatedCmd(o))
	return cmd
}

// secretStoreRotatedOptions are the flags of `flotilla secretstore rotated`.
type secretStoreRotatedOptions struct {
	*apiOptions
	Name string
	Path string
}

func newSecretStoreRotatedCmd(parent *apiOptions) *cobra.Command {
	o := secretStoreRotatedOptions{apiOptions: parent}
	cmd := &cobra.Command{
		Use:   "rotated NAME",
		Short: "Re-read a store's values now and queue the applications that use them",
		Long: `Rotated tells the controller that the secret store NAME rotated a value, so it
need not wait for the store's pollInterval: the store's values (only the entry
at --path, when given) are read again by the next pass, and the applications
that use them, among those your token may operate, are due at once.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return runAPI(cmd, o.apiOptions, requestTimeout, func(ctx context.Context, c *client.Client) error {
				return runSecretStoreRotated(ctx, c, o, cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().StringVar(&o.Path, "path", "", "only the entry at this path, as compose names it (kv/data/shop/db)")
	return cmd
}

func runSecretStoreRotated(ctx context.Context, c *client.Client, o secretStoreRotatedOptions, w io.Writer) error {
	r, err := c.StoreRotated(ctx, o.Name, o.Path)
	if err != nil {
		return fmt.Errorf("secret store %s rotated: %w", o.Name, err)
	}
	if o.Output != outputTable {
		return printObject(w, o.Output, r)
	}
	if len(r.Queued) == 0 {
		_, err = fmt.Fprintf(w, "%s: values will be read again; no application that uses them was queued\n", o.Name)
		return err
	}
	_, err = fmt.Fprintf(w, "%s: values will be read again; queued %s\n", o.Name, strings.Join(r.Queued, ", "))
	return err
}
