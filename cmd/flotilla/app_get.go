package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/client"
)

// appGetOptions are the flags of `flotilla app get`.
type appGetOptions struct {
	*apiOptions
	Name string
}

func newAppGetCmd(parent *apiOptions) *cobra.Command {
	o := appGetOptions{apiOptions: parent}
	return &cobra.Command{
		Use:               "get NAME",
		Short:             "Show one application: sync, health, revisions and every service",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAppNames(parent),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return runAPI(cmd, o.apiOptions, requestTimeout, func(ctx context.Context, c *client.Client) error {
				return runAppGet(ctx, c, o, cmd.OutOrStdout())
			})
		},
	}
}

func runAppGet(ctx context.Context, c *client.Client, o appGetOptions, w io.Writer) error {
	st, err := c.Application(ctx, o.Name)
	if err != nil {
		return fmt.Errorf("get %s: %w", o.Name, err)
	}
	if o.Output != outputTable {
		return printObject(w, o.Output, st)
	}
	return printStatus(w, st, time.Now())
}

// printStatus writes an application's status as labelled lines and a
// service table.
func printStatus(w io.Writer, st application.Status, now time.Time) error {
	tw := newTable(w)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	sync := string(st.Sync)
	if st.SyncReason != "" {
		sync += " (" + string(st.SyncReason) + " changed)"
	}
	row("Name", st.Name)
	row("Stack", st.Stack)
	row("Sync", sync)
	row("Health", string(st.Health))
	row("Health message", st.HealthMessage)
	row("Revision", st.Revision)
	if st.SeenRevision != st.Revision {
		row("Seen revision", st.SeenRevision)
	}
	if st.LastAppliedRevision > 0 {
		row("Release", strconv.Itoa(st.LastAppliedRevision))
	}
	row("Chart", st.Chart)
	if !st.LastSyncTime.IsZero() {
		row("Last sync", st.LastSyncTime.Local().Format(time.DateTime)+" ("+ago(now, st.LastSyncTime)+")")
	}
	row("Last error", st.LastError)
	for _, u := range st.Unavailable {
		row("Unavailable", u)
	}
	for _, u := range st.Warnings {
		row("Warning", u)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Services) > 0 {
		fmt.Fprintln(w)
		tw = newTable(w)
		fmt.Fprintln(tw, "SERVICE\tHEALTH\tTASKS\tMESSAGE")
		for _, s := range st.Services {
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\n", s.Name, s.Health, s.Running, s.Desired, oneLine(s.Message, 70))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(st.Rollouts) > 0 {
		fmt.Fprintln(w)
		if err := printRollouts(w, st.Rollouts); err != nil {
			return err
		}
	}
	if err := printImages(w, st.Images, now); err != nil {
		return err
	}
	if err := printSecretRefs(w, st.SecretRefs, now); err != nil {
		return err
	}
	return printHooks(w, st.Hooks, now)
}

// printSecretRefs lists the secrets the deployed revision took from secret
// stores: what uses each value (a secret, a config, or a service's
// environment variable), where it lives, the store's version, the swarm
// object that holds it and its last rotation. Never a value: the status has
// none.
func printSecretRefs(w io.Writer, refs []application.SecretRefStatus, now time.Time) error {
	if len(refs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "SECRET	KIND	SERVICE	STORE	PATH	KEY	VERSION	SWARM SECRET	LAST ROTATED")
	for _, r := range refs {
		kind, service, rotated := r.Kind, "-", "never"
		if kind == "" {
			kind = "secret"
		}
		if r.Service != "" {
			service = termSafe(r.Service)
		}
		if !r.LastRotated.IsZero() {
			rotated = fmt.Sprintf("%s (revision %d)", ago(now, r.LastRotated), r.RotatedRevision)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termSafe(r.Secret), termSafe(kind), service, termSafe(r.Store),
			termSafe(r.Path), termSafe(r.Key), refVersion(r), termSafe(r.SwarmSecret), rotated)
	}
	return tw.Flush()
}

// refVersion is a store value's version as a table shows it: the entry's
// version number (Vault KV v2, 1Password), or the start of a version id
// (AWS Secrets Manager's are 36-character UUIDs, whose first 8 characters
// tell two apart as a commit's do); "-" for a store that keeps no
// versions (KV v1).
func refVersion(r application.SecretRefStatus) string {
	switch {
	case r.VersionID != "":
		id := []rune(r.VersionID)
		if len(id) > 8 {
			id = id[:8]
		}
		return termSafe(string(id))
	case r.Version > 0:
		return strconv.Itoa(r.Version)
	}
	return "-"
}

// heldOutcomes are the image outcomes that wrote nothing and wait for the
// registry or the policy to change (see docs/images.md).
var heldOutcomes = map[string]bool{"backwards": true, "vanished": true, "no-candidate": true, "error": true}

// printImages writes what image automation last did: when it ran, its last
// commit and error, and each marked field with its value in git, the
// newest reference found and the outcome. Nothing for an application
// without image updates.
func printImages(w io.Writer, im *application.ImageStatus, now time.Time) error {
	if im == nil {
		return nil
	}
	fmt.Fprintln(w)
	summary := "Image updates: last run " + ago(now, im.LastRun)
	if pr := im.PullRequest; pr != nil {
		summary += fmt.Sprintf("; pull request #%d (%s into %s)", pr.Number, pr.Branch, pr.Base)
	}
	if im.LastCommit != "" {
		summary += "; last commit " + shortSHA(termSafe(im.LastCommit))
		if !im.LastCommitTime.IsZero() {
			summary += " (" + ago(now, im.LastCommitTime) + ")"
		}
	}
	fmt.Fprintln(w, summary)
	if im.LastError != "" {
		fmt.Fprintln(w, "Image error: "+oneLine(termSafe(im.LastError), 200))
	}
	if len(im.Fields) == 0 {
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "IMAGE\tFILE\tFIELD\tCURRENT\tNEWEST\tOUTCOME\tREASON")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return oneLine(termSafe(s), 100)
	}
	for _, f := range im.Fields {
		outcome := dash(f.Outcome)
		if heldOutcomes[f.Outcome] && f.Outcome != "error" {
			outcome += " (held)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(f.Image), dash(f.File), dash(f.Field),
			dash(f.Current), dash(f.Newest), outcome, oneLine(termSafe(f.Reason), 70))
	}
	return tw.Flush()
}

// termSafe replaces the control characters a terminal acts on (ESC, CSI,
// carriage return, backspace, NEL, ...) with U+FFFD; tabs and newlines,
// which tables are made of, pass. A tag or an error comes from a registry
// or a git remote, and an escape sequence in it must not reach the
// terminal. termSafeWriter applies it to every table the CLI prints.
func termSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return unicode.ReplacementChar
		}
		return r
	}, s)
}

// printHooks writes the hook jobs as a table in the order they run, and
// the log tail of each failed one under it.
func printHooks(w io.Writer, hooks []application.HookStatus, now time.Time) error {
	if len(hooks) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "HOOK\tPHASE\tWAVE\tSTATE\tREVISION\tEXIT\tFINISHED\tMESSAGE")
	for _, h := range hooks {
		rev, exit, finished := "-", "-", "-"
		if h.Revision > 0 {
			rev = strconv.Itoa(h.Revision)
		}
		if h.ExitCode != nil {
			exit = strconv.Itoa(*h.ExitCode)
		}
		if !h.FinishedAt.IsZero() {
			finished = ago(now, h.FinishedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.Phase, h.Wave, h.State, rev, exit, finished, oneLine(h.Message, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range hooks {
		if len(h.LogTail) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s hook %s, last log lines:\n", h.Phase, h.Name)
		for _, l := range h.LogTail {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	return nil
}
