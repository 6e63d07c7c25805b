package appset

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/source"
)

// ForgeClient is the default of Options.Forges: a forge.Client for the
// generator's forge (named, or derived from a github.com repoURL), with the
// token of its tokenFile.
func ForgeClient(g *application.PullRequestGenerator) (forge.Lister, string, error) {
	kind, api, repo, _ := forge.Derive(g.RepoURL)
	token := ""
	if f := g.Forge; f != nil {
		kind, api = f.Kind, f.API
		if f.Repo != "" {
			repo = f.Repo
		}
		if f.TokenFile != "" {
			b, err := readSmall(f.TokenFile)
			if err != nil {
				return nil, "", fmt.Errorf("forge tokenFile: %w", err)
			}
			token = strings.TrimSpace(string(b))
		}
	}
	if kind == "" || repo == "" {
		return nil, "", errors.New("no forge: name one (forge: {kind, api, repo}); only github.com is derived")
	}
	return &forge.Client{Kind: kind, API: api, Token: token}, repo, nil
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// pullRequests yields one element per open pull request, as the forge
// reports it, that the generator's rules admit, in the order of their
// numbers: number, ref (refs/pull/N/head), sha (the forge's head commit)
// and shortSHA. A pull request whose ref in the repository does not point
// at the forge's head commit is left out until they agree, so what is
// deployed is the commit the forge vouches for, not whatever the ref says.
// What is left out, and why, is logged when it changes.
func (e *Expander) pullRequests(ctx context.Context, g *application.PullRequestGenerator) ([]Params, error) {
	if e.opts.Refs == nil {
		return nil, errors.New("pull-request generator: no ref lister configured")
	}
	forges := e.opts.Forges
	if forges == nil {
		forges = ForgeClient
	}
	lister, repo, err := forges(g)
	if err != nil {
		return nil, fmt.Errorf("pull-request generator: %w", err)
	}
	open, err := lister.ListOpen(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("pull-request generator: %w", &ReadError{RepoURL: g.RepoURL, Err: err})
	}
	var refs map[string]string
	if len(open) > 0 {
		if refs, err = e.opts.Refs.ListRefs(ctx, g.RepoURL, g.Credentials); err != nil {
			return nil, fmt.Errorf("pull-request generator: %w", &ReadError{RepoURL: g.RepoURL, Err: err})
		}
	}
	now := time.Now
	if e.opts.Now != nil {
		now = e.opts.Now
	}
	kept, left := Previewable(g, open, refs, now())
	if e.opts.Fetcher != nil {
		if kept, left, err = e.pin(ctx, g, kept, left); err != nil {
			return nil, fmt.Errorf("pull-request generator: %w", &ReadError{RepoURL: g.RepoURL, Err: err})
		}
	}
	out := make([]Params, len(kept))
	for i, p := range kept {
		out[i] = Params{"number": strconv.Itoa(p.Number), "ref": fmt.Sprintf(application.PreviewRef, p.Number),
			"sha": p.HeadSHA, "shortSHA": p.HeadSHA[:8]}
	}
	e.report(repo, g.RepoURL, left)
	return out, nil
}

// pin fetches each admitted pull request's ref and keeps it only if the
// commit fetched is the forge's head commit. The commit is then in the
// controller's cache, so a template whose revision is {{.sha}} deploys
// exactly that commit: the fetcher serves a cached commit without asking
// the remote, and cannot otherwise reach a commit that only a pull-request
// ref (a fork's) points at. A repository that cannot be read fails the
// generator (its previews are kept); a ref it no longer has leaves that
// pull request out.
func (e *Expander) pin(ctx context.Context, g *application.PullRequestGenerator, kept []forge.PullRequest, left []LeftOut) ([]forge.PullRequest, []LeftOut, error) {
	out := kept[:0:0]
	for _, p := range kept {
		ref := fmt.Sprintf(application.PreviewRef, p.Number)
		rev, err := e.opts.Fetcher.Fetch(ctx, source.Request{RepoURL: g.RepoURL, Revision: ref, Credentials: g.Credentials})
		switch {
		case errors.Is(err, source.ErrRevisionNotFound):
			left = append(left, LeftOut{p.Number, ref + " is gone"})
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("fetch %s: %w", ref, err)
		}
		commit := rev.Commit
		rev.Release()
		if !strings.EqualFold(commit, p.HeadSHA) {
			left = append(left, LeftOut{p.Number, fmt.Sprintf("fetched %s at %s, not at the forge's head commit %s", ref, short(commit), short(p.HeadSHA))})
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(left, func(a, b LeftOut) int { return a.Number - b.Number })
	return out, left, nil
}

// LeftOut is a pull request a preview generator did not admit, and why.
type LeftOut struct {
	Number int
	Reason string
}

// Previewable applies a pull-request generator's rules to the open pull requests
// a forge reported, with refs (ref name to commit) from the repository:
// forks only if allowed, labels and authors, the TTL, the head commit the
// ref must match, then the cap (the most recently updated first). It
// returns those admitted, sorted by number, and those left out.
func Previewable(g *application.PullRequestGenerator, open []forge.PullRequest, refs map[string]string, now time.Time) (kept []forge.PullRequest, left []LeftOut) {
	ttl := g.TTL.Duration
	if ttl <= 0 {
		ttl = application.DefaultPreviewTTL
	}
	limit := g.Max
	if limit <= 0 {
		limit = application.DefaultPreviewMax
	}
	for _, p := range open {
		updated := p.UpdatedAt
		if updated.IsZero() {
			updated = p.CreatedAt
		}
		ref := fmt.Sprintf(application.PreviewRef, p.Number)
		var why string
		switch {
		case p.Fork && !g.Forks:
			why = fmt.Sprintf("from another repository (%q); forks: false", p.HeadRepo)
		case len(g.Labels) > 0 && !slices.ContainsFunc(p.Labels, func(l string) bool { return slices.Contains(g.Labels, l) }):
			why = fmt.Sprintf("has none of the labels %v", g.Labels)
		case len(g.Authors) > 0 && !slices.ContainsFunc(g.Authors, func(a string) bool { return strings.EqualFold(a, p.Author) }):
			why = fmt.Sprintf("author %q is not in authors", p.Author)
		case updated.IsZero() || now.Sub(updated) > ttl:
			why = fmt.Sprintf("not updated within the ttl (%s)", ttl)
		case !strings.EqualFold(refs[ref], p.HeadSHA):
			why = fmt.Sprintf("%s is at %q, not at the forge's head commit %s", ref, short(refs[ref]), short(p.HeadSHA))
		}
		if why != "" {
			left = append(left, LeftOut{p.Number, why})
			continue
		}
		kept = append(kept, p)
	}
	slices.SortStableFunc(kept, func(a, b forge.PullRequest) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), a.Number-b.Number)
	})
	if len(kept) > limit {
		for _, p := range kept[limit:] {
			left = append(left, LeftOut{p.Number, fmt.Sprintf("over max (%d previews, the most recently updated kept)", limit)})
		}
		kept = kept[:limit]
	}
	slices.SortFunc(kept, func(a, b forge.PullRequest) int { return a.Number - b.Number })
	slices.SortFunc(left, func(a, b LeftOut) int { return a.Number - b.Number })
	return kept, left
}

func short(s string) string { return s[:min(8, len(s))] }

// report logs what a generator left out when it differs from last time.
func (e *Expander) report(repo, repoURL string, left []LeftOut) {
	parts := make([]string, len(left))
	for i, l := range left {
		parts[i] = fmt.Sprintf("#%d: %s", l.Number, l.Reason)
	}
	msg := strings.Join(parts, "; ")
	e.mu.Lock()
	changed := e.left[repoURL] != msg
	e.left[repoURL] = msg
	e.mu.Unlock()
	if changed && msg != "" && e.opts.Log != nil {
		e.opts.Log.Info("pull requests not previewed", "repo", repo, "left", msg)
	}
}
