package imagewrite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/imagepolicy"
	"github.com/flotilla-gitops/flotilla/redact"
	"github.com/flotilla-gitops/flotilla/regauth"
	"github.com/flotilla-gitops/flotilla/registryclient"
	"github.com/flotilla-gitops/flotilla/source"
)

// Registry is what the updater asks; *registryclient.Client is one, shared
// by every application so its cache and backoff are too.
type Registry interface {
	Tags(ctx context.Context, image string, cred registryclient.Credential) ([]string, error)
	Digest(ctx context.Context, image, tag string, cred registryclient.Credential) (string, error)
}

var _ Registry = (*registryclient.Client)(nil)

// Updater runs an application's image policies: it asks the registry,
// decides, rewrites the marked fields and commits through source.
type Updater struct {
	Registry Registry
	Logger   *slog.Logger
	// ScratchDir holds the temporary clones. Default os.TempDir().
	ScratchDir string
	// Forge is how pull requests are opened, with
	// imageUpdates.pullRequest.
	Forge ForgeClient

	mu sync.Mutex
	// steady remembers, per application, the last run that had nothing to
	// commit: while the branch head and the registry's answers stay the
	// same, the next run repeats its result without cloning.
	steady map[string]steadyRun
}

type steadyRun struct {
	head, fingerprint string
	result            Result
}

// Target is one marked field's outcome.
type Target struct {
	Image string
	// File is the repository path; Field the YAML path in it
	// (services.web.image, image.tag).
	File, Field string
	// Old and New are the field's values; New equals Old unless the
	// outcome is Update.
	Old, New string
	Outcome  imagepolicy.Outcome
	// Newest is the newest tag the policy found (a digest for a digest
	// policy); "" when the registry had none.
	Newest string
	// Reason explains a non-Update outcome.
	Reason string
	// Err is set when the field could not be decided (registry error,
	// field missing, another image).
	Err error
}

// Result is one run's outcome for an application.
type Result struct {
	App     string
	Targets []Target
	// Commit is what source did: Commit.Commit is "" when nothing was
	// committed (or DryRun).
	Commit source.CommitResult
	// Reused says nothing moved since the last run that had nothing to
	// commit (the branch head and every registry answer are the same), so
	// no clone was made and that run's targets are repeated.
	Reused bool
	// PullRequest is the pull request that proposes the updates, with
	// imageUpdates.pullRequest; nil when nothing is proposed (the base
	// branch has every update) or without it. Commit.Commit is then the
	// commit pushed to its head branch.
	PullRequest *PullRequest
}

// Updates are the targets whose outcome is Update.
func (r Result) Updates() []Target {
	var out []Target
	for _, t := range r.Targets {
		if t.Outcome == imagepolicy.Update {
			out = append(out, t)
		}
	}
	return out
}

// Run applies app's image policies: with dryRun, only reports what it
// would commit. creds is the application's registry credential resolver
// (nil: anonymous). The error is for what stops the whole run (clone,
// push); a field that cannot be decided is reported in its Target and the
// others still go ahead.
func (u *Updater) Run(ctx context.Context, app *application.Application, creds regauth.Resolver, dryRun bool) (Result, error) {
	res := Result{App: app.Name}
	iu := app.ImageUpdates
	if iu == nil {
		return res, nil
	}
	log := u.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "imagewrite", "app", app.Name)
	policies := make([]*imagepolicy.Policy, len(iu.Images))
	for i, ip := range iu.Images {
		p, err := imagepolicy.Compile(ip)
		if err != nil {
			return res, fmt.Errorf("application %s: imageUpdates.images[%d]: %w", app.Name, i, err)
		}
		policies[i] = p
	}
	// One registry answer per image per run, however many fields use it;
	// the client shares it further, across runs and applications.
	ask := newAsker(u.Registry, creds)
	u.mu.Lock()
	last, steady := u.steady[app.Name]
	u.mu.Unlock()
	if steady && !dryRun {
		// Nothing moved since a run with nothing to commit: repeat it
		// without a clone.
		fp, complete := ask.prefetch(ctx, app, policies)
		if complete && fp == last.fingerprint {
			if h, err := source.BranchHead(ctx, app.Source.RepoURL, iu.Branch, app.Source.Credentials); err == nil && h == last.head {
				out := last.result
				out.Reused = true
				return out, nil
			}
		}
	}
	change := func(ctx context.Context, files *source.Files) (string, error) {
		targets, err := edit(ctx, app, policies, ask, files)
		res.Targets = targets
		if err != nil {
			return "", err
		}
		return Message(app.Name, targets), nil
	}
	req := source.CommitRequest{
		RepoURL:        app.Source.RepoURL,
		Branch:         iu.Branch,
		Credentials:    app.Source.Credentials,
		Author:         iu.Author,
		SigningKeyFile: iu.SigningKeyFile,
		DryRun:         dryRun,
		ScratchDir:     u.ScratchDir,
		Change:         change,
		Own:            ownCommit(app),
	}
	var cr source.CommitResult
	var err error
	if iu.PullRequest != nil {
		cr, res.PullRequest, err = u.propose(ctx, app, req, log)
	} else {
		cr, err = source.Commit(ctx, req)
	}
	res.Commit = cr
	if err != nil {
		return res, redact.Error(fmt.Errorf("application %s: image updates to branch %s: %w", app.Name, iu.Branch, err))
	}
	for _, t := range res.Targets {
		switch {
		case t.Err != nil:
			log.Warn("image field not updated", "image", t.Image, "file", t.File, "field", t.Field, "error", redact.Error(t.Err))
		case t.Outcome == imagepolicy.Backwards || t.Outcome == imagepolicy.Vanished || t.Outcome == imagepolicy.NoCandidate:
			log.Warn("image field left as it is", "image", t.Image, "file", t.File, "field", t.Field, "reason", t.Reason)
		}
	}
	if cr.Commit != "" && iu.PullRequest == nil {
		log.Info("image updates committed; the next pass deploys them", "revision", cr.Commit, "updates", len(res.Updates()))
	}
	var keep *steadyRun
	if cr.Commit == "" && cr.Message == "" && !dryRun {
		// Mostly answered from this run's memo already.
		if fp, complete := ask.prefetch(ctx, app, policies); complete {
			keep = &steadyRun{head: cr.Base, fingerprint: fp, result: res}
		}
	}
	u.mu.Lock()
	if u.steady == nil {
		u.steady = map[string]steadyRun{}
	}
	if keep != nil {
		u.steady[app.Name] = *keep
	} else {
		delete(u.steady, app.Name)
	}
	u.mu.Unlock()
	return res, nil
}

// prefetch asks the registry every question app's policies need, and
// returns a fingerprint of the answers and of the policies; complete is
// false when any answer was an error (then nothing is reused).
func (a *asker) prefetch(ctx context.Context, app *application.Application, policies []*imagepolicy.Policy) (fingerprint string, complete bool) {
	h := sha256.New()
	cfg, _ := json.Marshal(struct {
		Path   string
		Images *application.ImageUpdates
	}{app.Source.Path, app.ImageUpdates})
	h.Write(cfg)
	complete = true
	for _, p := range policies {
		if p.Kind == imagepolicy.Digest {
			d, err := a.resolve(ctx, p.Image, p.Tag)
			complete = complete && err == nil
			fmt.Fprintf(h, "\x00%s:%s=%s", p.Image, p.Tag, d)
			continue
		}
		tags, err := a.listTags(ctx, p.Image)
		complete = complete && err == nil
		fmt.Fprintf(h, "\x00%s=%s", p.Image, strings.Join(slices.Sorted(slices.Values(tags)), ","))
	}
	return hex.EncodeToString(h.Sum(nil)), complete
}

// asker memoises registry answers for one run.
type asker struct {
	reg    Registry
	creds  regauth.Resolver
	tags   map[string]answer
	digest map[string]answer
}

type answer struct {
	tags   []string
	digest string
	err    error
}

func newAsker(reg Registry, creds regauth.Resolver) *asker {
	return &asker{reg: reg, creds: creds, tags: map[string]answer{}, digest: map[string]answer{}}
}

func (a *asker) listTags(ctx context.Context, image string) ([]string, error) {
	if v, ok := a.tags[image]; ok {
		return v.tags, v.err
	}
	cred, err := registryclient.CredentialFor(ctx, a.creds, image)
	var tags []string
	if err == nil {
		tags, err = a.reg.Tags(ctx, image, cred)
	}
	a.tags[image] = answer{tags: tags, err: err}
	return tags, err
}

// resolve returns the digest of image:tag, "" when the registry has no
// such tag.
func (a *asker) resolve(ctx context.Context, image, tag string) (string, error) {
	key := image + ":" + tag
	if v, ok := a.digest[key]; ok {
		return v.digest, v.err
	}
	cred, err := registryclient.CredentialFor(ctx, a.creds, image)
	var d string
	if err == nil {
		d, err = a.reg.Digest(ctx, image, tag, cred)
		if errors.Is(err, registryclient.ErrNotFound) {
			d, err = "", nil
		}
	}
	a.digest[key] = answer{digest: d, err: err}
	return d, err
}

// mark is one marked field to decide.
type mark struct {
	policy int
	file   string // repository path
	path   []string
	form   string
}

func marks(app *application.Application) []mark {
	var out []mark
	for i, ip := range app.ImageUpdates.Images {
		for _, t := range ip.Compose {
			for _, s := range t.Services {
				out = append(out, mark{policy: i, file: path.Join(app.Source.Path, t.File), path: []string{"services", s, "image"}, form: application.FormReference})
			}
		}
		for _, t := range ip.Values {
			form := t.Form
			if form == "" {
				form = application.FormReference
			}
			out = append(out, mark{policy: i, file: path.Join(app.Source.Path, t.File), path: strings.Split(t.Path, "."), form: form})
		}
	}
	return out
}

// edit decides every marked field against files and writes the files
// whose fields change.
func edit(ctx context.Context, app *application.Application, policies []*imagepolicy.Policy, ask *asker, files *source.Files) ([]Target, error) {
	var targets []Target
	changes := map[string][]Change{}
	data := map[string][]byte{}
	var order []string
	for _, m := range marks(app) {
		p := policies[m.policy]
		t := Target{Image: p.Image, File: m.file, Field: strings.Join(m.path, ".")}
		b, ok := data[m.file]
		if !ok {
			var err error
			if b, err = files.ReadFile(m.file); err != nil {
				t.Err = fmt.Errorf("read %s: %w", m.file, err)
				targets = append(targets, t)
				continue
			}
			data[m.file] = b
			order = append(order, m.file)
		}
		f, err := Find(b, m.path)
		if err != nil {
			t.Err = fmt.Errorf("%s: %w", m.file, err)
			targets = append(targets, t)
			continue
		}
		t.Old, t.New = f.Value, f.Value
		cur, err := currentRef(f.Value, p.Image, m.form)
		if err != nil {
			t.Err = fmt.Errorf("%s: %s: %w", m.file, t.Field, err)
			targets = append(targets, t)
			continue
		}
		var d imagepolicy.Decision
		if p.Kind == imagepolicy.Digest {
			resolved, err := ask.resolve(ctx, p.Image, p.Tag)
			if err != nil {
				t.Err = err
				targets = append(targets, t)
				continue
			}
			d = p.ChooseDigest(cur.Digest, resolved)
		} else {
			tags, err := ask.listTags(ctx, p.Image)
			if err != nil {
				t.Err = err
				targets = append(targets, t)
				continue
			}
			d = p.ChooseTag(cur.Tag, tags)
		}
		t.Outcome, t.Reason, t.Newest = d.Outcome, d.Reason, d.Newest
		if d.Outcome == imagepolicy.Update {
			next := imagepolicy.Next(cur, d, p.Kind)
			t.New = next.String()
			if m.form == application.FormTag {
				t.New = strings.TrimPrefix(t.New, next.Repository+":")
			}
			if t.New != t.Old {
				changes[m.file] = append(changes[m.file], Change{Field: f, New: t.New})
			} else {
				t.Outcome = imagepolicy.Current
			}
		}
		targets = append(targets, t)
	}
	for _, file := range order {
		if len(changes[file]) == 0 {
			continue
		}
		out, err := Apply(data[file], changes[file])
		if err != nil {
			return targets, fmt.Errorf("application %s: %s: %w", app.Name, file, err)
		}
		if err := files.WriteFile(file, out); err != nil {
			return targets, fmt.Errorf("application %s: write %s: %w", app.Name, file, err)
		}
	}
	return targets, nil
}

// currentRef reads a field's value as a reference to image. A tag-form
// field holds tag[@digest] and borrows the policy's repository.
func currentRef(value, image, form string) (imagepolicy.Ref, error) {
	if form == application.FormTag {
		r, err := imagepolicy.ParseRef(image+":"+value, image)
		if err != nil {
			return r, fmt.Errorf("%q is not a tag: %w", value, err)
		}
		return r, nil
	}
	return imagepolicy.ParseRef(value, image)
}

// Trailer is the key of the commit message's last line, which names the
// application whose policies made the commit.
const Trailer = "Flotilla-Application"

// Message is the commit message for targets, "" when none is an update:
// a subject naming the images, then one line per image old -> new with the
// fields it was written to, then a trailer naming the application so that
// a commit can be traced to the policy that made it.
func Message(app string, targets []Target) string {
	type change struct{ image, old, new string }
	var keys []change
	fields := map[change][]string{}
	for _, t := range targets {
		if t.Outcome != imagepolicy.Update {
			continue
		}
		k := change{t.Image, t.Old, t.New}
		if _, ok := fields[k]; !ok {
			keys = append(keys, k)
		}
		fields[k] = append(fields[k], t.File+" "+t.Field)
	}
	if len(keys) == 0 {
		return ""
	}
	var subject []string
	for _, k := range keys {
		s := k.image + " " + shortRef(k.new, k.image)
		if !slices.Contains(subject, s) {
			subject = append(subject, s)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "images: update %s\n\n", strings.Join(subject, ", "))
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s -> %s\n", k.image, k.old, k.new)
		for _, f := range fields[k] {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	fmt.Fprintf(&b, "\n%s: %s\n", Trailer, app)
	return b.String()
}

// ownCommit tells the updater's commits for app: one parent, authored and
// committed by imageUpdates.author, the message ending with app's
// trailer. Another application's commit, or a human's, is not one.
func ownCommit(app *application.Application) func(*object.Commit) bool {
	email := app.ImageUpdates.Author.Email
	trailer := "\n" + Trailer + ": " + app.Name + "\n"
	return func(c *object.Commit) bool {
		return len(c.ParentHashes) == 1 && strings.EqualFold(c.Author.Email, email) &&
			strings.EqualFold(c.Committer.Email, email) && strings.HasSuffix(c.Message, trailer)
	}
}

// shortRef is a field's value without the image repository, for the
// subject line.
func shortRef(v, image string) string {
	if r, err := imagepolicy.ParseRef(v, image); err == nil {
		return strings.TrimPrefix(r.String(), r.Repository+":")
	}
	return v
}
