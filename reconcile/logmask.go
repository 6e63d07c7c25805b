package reconcile

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/compose"
	"github.com/flotilla-gitops/flotilla/redact"
)

// LogMaskText is what a secret value reads as in service logs.
const LogMaskText = redact.Mark

// minMaskLen is the shortest value blanked: a shorter one ("true", "admin")
// is as likely an ordinary word of a log line as the secret, and blanking
// every occurrence would say which words the secret is.
const minMaskLen = 6

// LogMask blanks an application's secret values in lines of its logs.
// From says which render the values came from ("revision 3 (commit
// abc1234)"). The zero value blanks nothing.
type LogMask struct {
	From string
	r    *strings.Replacer
}

// Blank returns line with every known secret value replaced by LogMaskText.
func (m LogMask) Blank(line string) string {
	if m.r == nil {
		return line
	}
	return m.r.Replace(line)
}

// newLogMask builds the replacer over values: each value as it is and
// trimmed, each line of a multi-line value, and the base64 forms (standard
// and URL alphabets, padded and not) of the value and its trimmed form, all
// at least minMaskLen bytes. Longer forms come first so one that contains
// another is blanked whole.
func newLogMask(from string, values []string) LogMask {
	set := map[string]struct{}{}
	add := func(s string) {
		if len(s) >= minMaskLen {
			set[s] = struct{}{}
		}
	}
	for _, v := range values {
		t := strings.TrimSpace(v)
		add(v)
		add(t)
		for _, l := range strings.Split(t, "\n") {
			add(strings.TrimSpace(l))
		}
		for _, raw := range []string{v, t} {
			if len(raw) < minMaskLen {
				continue
			}
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
				add(enc.EncodeToString([]byte(raw)))
			}
		}
	}
	if len(set) == 0 {
		return LogMask{From: from}
	}
	forms := make([]string, 0, len(set))
	for s := range set {
		forms = append(forms, s)
	}
	sort.Slice(forms, func(i, j int) bool {
		if len(forms[i]) != len(forms[j]) {
			return len(forms[i]) > len(forms[j])
		}
		return forms[i] < forms[j]
	})
	pairs := make([]string, 0, 2*len(forms))
	for _, s := range forms {
		pairs = append(pairs, s, LogMaskText)
	}
	return LogMask{From: from, r: strings.NewReplacer(pairs...)}
}

// LogMask reproduces the secret values of the application's deployed
// revision, the newest release record, and returns a mask over them for its
// service logs: the plaintext of its file secrets and every value decrypted
// with SOPS (sealed env values and configs). Outside a pass the controller
// holds none of them, so they come from a render of the record's commit,
// the one a rollback to it would make: from the render cache when a pass
// rendered that commit, otherwise fetched and rendered with the key in use
// now. A chart application, or one without a record, is masked with a
// render of what the repository declares now.
//
// An error means the values could not be reproduced (repository
// unreachable, commit gone, key changed); the caller must then not show the
// logs as masked. A record that holds no secret at all needs no render, so
// an application without secrets keeps its logs when git is down. Secrets
// declared external are not known to the controller and are not masked.
// The values stay in the returned replacer only; they are never logged.
func (c *Controller) LogMask(ctx context.Context, name string) (LogMask, error) {
	app, err := c.appNamed(name)
	if err != nil {
		return LogMask{}, err
	}
	p := &pass{app: app, owner: c.opts.ControllerID + "/" + app.Name, log: c.log.With("app", app.Name)}
	b, err := c.backendOf(app)
	if err != nil {
		return LogMask{}, fmt.Errorf("application %q: %w", name, err)
	}
	p.base, p.backend = b, b
	rec, err := capability.LatestRelease(ctx, b, app.Stack, nil)
	if err != nil {
		return LogMask{}, fmt.Errorf("application %q: read its release records for the secrets to blank: %w", name, err)
	}
	if rec != nil && rec.Commit != "" && app.Source.Chart == nil {
		declared, err := compose.Convert(ctx, rec.Manifest, app.Stack, nil)
		if err != nil {
			return LogMask{}, fmt.Errorf("application %q: revision %d: %w", name, rec.Revision, err)
		}
		from := fmt.Sprintf("revision %d (commit %s)", rec.Revision, shortCommit(rec.Commit))
		if len(declared.Secrets) == 0 && len(compose.SealedValues(rec.Manifest)) == 0 {
			return newLogMask(from, nil), nil
		}
		r, err := c.cachedRender(p, rec.Commit)
		if err != nil {
			return LogMask{}, fmt.Errorf("application %q: %w", name, err)
		}
		if r == nil {
			if r, err = c.renderRecordCommit(ctx, p, rec); err != nil {
				return LogMask{}, fmt.Errorf("application %q: reproduce the secrets of %s to blank them: %w", name, from, err)
			}
		}
		return newLogMask(from, renderedSecrets(r)), nil
	}
	defer func() { p.rev.Release(); p.values.Release() }()
	for _, s := range []step{{name: "fetch", run: (*Controller).fetch}, {name: "render", run: (*Controller).render}} {
		if err := s.run(c, ctx, p); err != nil {
			return LogMask{}, fmt.Errorf("application %q: reproduce its secrets to blank them: %w", name, err)
		}
	}
	return newLogMask("commit "+shortCommit(p.rev.Commit), renderedSecrets(p.rendered)), nil
}

// cachedRender is the render cache's entry for the application at commit,
// nil when it has none; it neither fetches nor renders.
func (c *Controller) cachedRender(p *pass, commit string) (*compose.Rendered, error) {
	ids, err := c.identities(p)
	if err != nil {
		return nil, err
	}
	if e, ok := c.renders.get(p.app.Name, renderKey(p.app, commit, ids.Fingerprint(), c.opts.RenderLimits)); ok {
		return e.rendered, nil
	}
	return nil, nil
}

// renderedSecrets lists the plaintext values r holds.
func renderedSecrets(r *compose.Rendered) []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.Sealed)+len(r.Secrets))
	for _, v := range r.Sealed {
		out = append(out, v)
	}
	for _, v := range r.Secrets {
		out = append(out, string(v))
	}
	return out
}
