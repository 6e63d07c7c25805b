// Command flotilla is the whole product in one binary: the controller, the
// offline tools (validate, render, plan) and the CLI that talks to a running
// controller's API. This file only wires subcommands and maps errors to exit
// codes.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/daemon"
	"github.com/flotilla-gitops/flotilla/renderbox"
)

// Exit codes of every subcommand, in this one place.
const (
	exitOK      = 0
	exitFailed  = 1 // the command ran and the answer is "no" (invalid, failed)
	exitMisuse  = 2 // bad flags or arguments
	exitUnknown = 3 // an error the command could not classify
	// exitChanges is the answer of `flotilla plan` and `flotilla image
	// plan` when they would change or commit something, for a CI job to
	// gate on. Their bad flags exit exitFailed, so that 2 always means
	// "something would change".
	exitChanges = 2
)

// exitError carries an exit code out of a command whose output has already
// been written, so main prints nothing more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "flotilla",
		Short:         "GitOps continuous delivery for Docker Swarm",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Every subcommand, listed here rather than registered from init, so
	// that one place shows the whole command line (help sorts them).
	root.AddCommand(
		newAppCmd(),
		newChartCmd(),
		newControllerCmd(),
		newImageCmd(),
		newInstallCmd(),
		newUninstallCmd(),
		newLoginCmd(),
		newLogoutCmd(),
		newPlanCmd(),
		newRenderCmd(),
		newSecretStoreCmd(),
		newStatusCmd(),
		newSwarmCmd(),
		newValidateCmd(),
		newVersionCmd(),
	)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "flotilla", version)
			return err
		},
	}
}

func main() {
	// A chart render child (see renderbox) is this binary too; it must
	// become one before anything else runs.
	renderbox.Main()
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the process exit code.
func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	return exitCodeOf(err)
}

func exitCodeOf(err error) int {
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// The controller has reported this failure itself.
	if errors.Is(err, daemon.ErrFailed) {
		return exitFailed
	}
	fmt.Fprintln(os.Stderr, "flotilla:", err)
	if isUsageError(err) {
		return exitMisuse
	}
	return exitFailed
}

// usageError marks bad flags or arguments.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func isUsageError(err error) bool {
	var u usageError
	var du daemon.UsageError
	if errors.As(err, &u) || errors.As(err, &du) {
		return true
	}
	// cobra's own flag and argument errors are plain errors; recognise them
	// by the messages cobra is known to produce.
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand flag", "unknown command", "accepts ", "requires at least", "flag needs an argument", "invalid argument", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
