package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/fault"
)

func init() { extraCommands = append(extraCommands, newValidateCmd) }

// validateOptions are the flags of `flotilla validate`.
type validateOptions struct {
	// File is the applications file to check.
	File string
}

func newValidateCmd() *cobra.Command {
	var opts validateOptions
	cmd := &cobra.Command{
		Use:   "validate -f applications.yaml",
		Short: "Check an applications file offline",
		Long: `Validate parses an applications file strictly, applies defaults and checks
every rule, without contacting git or Docker. It prints every problem, one per
line as FILE:LINE: application "NAME": field PATH: MESSAGE, and exits 1 if there
is any; it exits 0 when the file is valid and 2 on misuse.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if code := runValidate(opts, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != exitOK {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "applications file to check")
	return cmd
}

// runValidate checks opts.File and returns the exit code. The success line
// goes to stdout; problems go to stderr, like a compiler's diagnostics.
func runValidate(opts validateOptions, stdout, stderr io.Writer) int {
	if opts.File == "" {
		fmt.Fprintln(stderr, "flotilla validate: -f applications file is required")
		return exitMisuse
	}
	f, err := application.Load(opts.File)
	if err != nil {
		for _, e := range flatten(err) {
			fmt.Fprintln(stderr, formatProblem(e))
		}
		return exitFailed
	}
	noun := "applications"
	if len(f.Applications) == 1 {
		noun = "application"
	}
	fmt.Fprintf(stdout, "%s: %d %s valid\n", opts.File, len(f.Applications), noun)
	return exitOK
}

// flatten undoes errors.Join so each problem gets its own line.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// formatProblem writes FILE:LINE: application "NAME": field PATH: MESSAGE,
// leaving out the parts a problem does not have, so editors and CI can jump
// to the line.
func formatProblem(err error) string {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		return err.Error()
	}
	var s string
	if fe.File != "" {
		s = fe.File
		if fe.Line > 0 {
			s += ":" + strconv.Itoa(fe.Line)
		}
		s += ": "
	}
	if fe.App != "" {
		s += "application " + strconv.Quote(fe.App) + ": "
	}
	if fe.Field != "" {
		s += "field " + fe.Field + ": "
	}
	if fe.Err != nil {
		s += fe.Err.Error()
	}
	return s
}
