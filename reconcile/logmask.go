package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/flotilla-gitops/flotilla/charts"
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

// LogMask reproduces the secret values of the application's revisions, the
// release records the swarm keeps, and returns a mask over them for its
// service logs: the plaintext of its file secrets and every value decrypted
// with SOPS or read from a secret store (sealed env values and configs).
// The deployed revision, the newest record, is not the only one whose values
// a log shows: a task it replaced (a rotation restarts the services that
// use a value; a canary's stable service runs the old one until the
// promote) printed the value it ran with, and Swarm keeps that task's logs.
// So the values of every earlier record are blanked too.
//
// Outside a pass the controller holds none of them, so they come from
// renders of each record's commit, the one a rollback to it would make
// (store values at the versions the record names): for the newest from the
// render cache when a pass rendered that commit, otherwise fetched and
// rendered with the key in use now; for earlier ones from the values an
// earlier request reproduced. An application without a record is masked
// with a render of what the repository declares now.
//
// A chart application's records are not rendered again: it is masked with
// a render of what its sources declare now and the values this controller
// rendered (seenSecrets keeps a chart's values, not only store ones). Every
// record's secret names and sealed placeholders derive from the values, so
// a record holding one that neither gives deployed a value changed since
// (in the chart's files, a store, or the age key) that is unknown here:
// the logs are withheld, naming the revision and the secret (chartUnseen).
//
// A store without versions (Vault KV v1, 1Password Connect) gives its
// current value to such a render, so a record whose store values were
// rotated since is not reproduced: the names the record holds for them
// (content-derived) differ from the render's. Those values are taken from
// the ones this controller rendered (seenSecrets), which are blanked in
// every case; one it never rendered (the rotation came before it started,
// or before it became leader) is unknown, and the logs are withheld.
//
// An error means some values could not be reproduced (repository
// unreachable, commit gone, key changed, store version destroyed, a value
// of a store without versions rotated away before this controller saw it,
// a chart's value changed before it started);
// the caller must then not show the logs as masked. Records that hold no
// secret at all need no render, so an application without secrets keeps
// its logs when git is down. Secrets declared external are not known to the
// controller and are not masked. The values stay in the returned replacer,
// and in memory for the next request; they are never logged.
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
	rs, err := b.Releases(ctx, app.Stack)
	if err != nil {
		return LogMask{}, fmt.Errorf("application %q: read its release records for the secrets to blank: %w", name, err)
	}
	if len(rs) > 0 && rs[0].Commit != "" && app.Source.Chart == nil {
		rec := &rs[0]
		from := fmt.Sprintf("revision %d (commit %s)", rec.Revision, shortCommit(rec.Commit))
		holds, err := holdsSecrets(ctx, p.app.Stack, rec)
		if err != nil {
			return LogMask{}, fmt.Errorf("application %q: revision %d: %w", name, rec.Revision, err)
		}
		var values []string
		if holds {
			r, err := c.cachedRender(p, rec.Commit)
			if err != nil {
				return LogMask{}, fmt.Errorf("application %q: %w", name, err)
			}
			if r == nil || c.unseen(app.Name, rec, staleRefs(rec, r)) != nil {
				// No render of the commit, or one whose store values
				// are not the record's: render the record's own.
				if r, err = c.renderRecordCommit(ctx, p, rec); err != nil {
					return LogMask{}, fmt.Errorf("application %q: reproduce the secrets of %s to blank them: %w", name, from, err)
				}
			}
			if err := c.unseen(app.Name, rec, staleRefs(rec, r)); err != nil {
				return LogMask{}, fmt.Errorf("application %q: %w", name, err)
			}
			values = renderedSecrets(r)
		}
		earlier, err := c.earlierValues(ctx, p, rs[1:])
		if err != nil {
			return LogMask{}, fmt.Errorf("application %q: %w", name, err)
		}
		if len(earlier) > 0 {
			from += " and the revisions before it"
		}
		values = append(values, earlier...)
		return newLogMask(from, append(values, c.seen.values(app.Name)...)), nil
	}
	defer func() { p.rev.Release(); p.values.Release() }()
	for _, s := range []step{{name: "fetch", run: (*Controller).fetch}, {name: "render", run: (*Controller).render}} {
		if err := s.run(c, ctx, p); err != nil {
			return LogMask{}, fmt.Errorf("application %q: reproduce its secrets to blank them: %w", name, err)
		}
	}
	from := "commit " + shortCommit(p.rev.Commit)
	if app.Source.Chart != nil {
		if err := c.chartUnseen(ctx, app.Name, app.Stack, rs, p.rendered); err != nil {
			return LogMask{}, fmt.Errorf("application %q: %w", name, err)
		}
		if len(rs) > 0 {
			from += " and the recorded revisions"
		}
	}
	values := append(renderedSecrets(p.rendered), c.seen.values(app.Name)...)
	return newLogMask(from, values), nil
}

// holdsSecrets reports whether rec deployed any secret or sealed value.
func holdsSecrets(ctx context.Context, stack string, rec *charts.Release) (bool, error) {
	declared, err := compose.Convert(ctx, rec.Manifest, stack, nil)
	if err != nil {
		return false, err
	}
	return len(declared.Secrets) > 0 || len(compose.SealedValues(rec.Manifest)) > 0, nil
}

// earlierValues returns the secret values of the records rs (the revisions
// before the deployed one), each reproduced once at its own versions and
// then kept in memory; what is kept for revisions no longer in rs goes.
// A record whose store values the reproduction does not give must have
// them known from this controller's renders, at every request (see
// LogMask).
func (c *Controller) earlierValues(ctx context.Context, p *pass, rs []charts.Release) ([]string, error) {
	keep := make(map[string]earlierEntry, len(rs))
	var out []string
	for i := range rs {
		rec := &rs[i]
		if rec.Commit == "" {
			continue
		}
		key := earlierKey(rec)
		e, ok := c.earlier.get(p.app.Name, key)
		if !ok {
			holds, err := holdsSecrets(ctx, p.app.Stack, rec)
			if err != nil {
				return nil, fmt.Errorf("revision %d: %w", rec.Revision, err)
			}
			if holds {
				r, err := c.renderRecordCommit(ctx, p, rec)
				if err != nil {
					return nil, fmt.Errorf("reproduce the secrets of revision %d (commit %s), whose tasks' logs may still be read, to blank them: %w",
						rec.Revision, shortCommit(rec.Commit), err)
				}
				e = earlierEntry{values: renderedSecrets(r), stale: staleRefs(rec, r)}
			}
		}
		keep[key] = e
		out = append(out, e.values...)
	}
	c.earlier.set(p.app.Name, keep)
	for i := range rs {
		if e := keep[earlierKey(&rs[i])]; len(e.stale) > 0 {
			if err := c.unseen(p.app.Name, &rs[i], e.stale); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// earlierKey names a record's values: its revision, commit and manifest
// (a stack removed and deployed again starts its revisions afresh).
func earlierKey(rec *charts.Release) string {
	sum := sha256.Sum256([]byte(rec.Manifest))
	return fmt.Sprintf("%d/%s/%s", rec.Revision, rec.Commit, hex.EncodeToString(sum[:]))
}

// earlierSecrets keeps, by application and record, the secret values of
// revisions before the deployed one that a logs request reproduced, so the
// next request does not render them again. A record never changes, so
// neither does its reproduction. The zero value is ready to use.
type earlierSecrets struct {
	mu sync.Mutex
	by map[string]map[string]earlierEntry
}

// earlierEntry is one record's reproduction: its values, and the store
// values the record names that it did not give (see staleRefs).
type earlierEntry struct {
	values []string
	stale  []charts.SecretRef
}

func (e *earlierSecrets) get(app, key string) (earlierEntry, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.by[app][key]
	return v, ok
}

// set replaces what is kept for app.
func (e *earlierSecrets) set(app string, values map[string]earlierEntry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.by == nil {
		e.by = map[string]map[string]earlierEntry{}
	}
	e.by[app] = values
}

// forget drops what is kept for app.
func (e *earlierSecrets) forget(app string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.by, app)
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
