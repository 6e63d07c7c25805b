package source

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/redact"
)

// ListRefs is ls-remote for callers that need a repository's refs rather
// than one revision's tree, such as a generator of pull-request previews:
// every ref name mapped to the commit it points to, annotated tags peeled.
// It uses the same credentials, deadlines and sanitising as Fetch, and
// stores nothing.
func (f *Fetcher) ListRefs(ctx context.Context, repoURL string, creds *application.Credentials) (_ map[string]string, err error) {
	loc, err := parseLocation(repoURL)
	if err != nil {
		return nil, redact.Error(err)
	}
	a, err := loadAuth(loc, creds)
	if err != nil {
		return nil, redact.Error(err)
	}
	defer func() {
		if err != nil {
			err = redact.Error(fmt.Errorf("list refs of %s: %w", loc.safe, err), a.secrets...)
		}
	}()
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: remoteName, URLs: []string{loc.url()}})
	var out map[string]string
	err = withDeadline(ctx, f.remoteTimeout, "list refs", func(ctx context.Context) error {
		refs, err := listRefs(ctx, remote, loc, a)
		if err != nil {
			return err
		}
		out = make(map[string]string, len(refs))
		for name, ref := range refs {
			n := name.String()
			if strings.HasSuffix(n, "^{}") || ref.Hash().IsZero() {
				continue
			}
			h := ref.Hash()
			if peeled, ok := refs[name+"^{}"]; ok {
				h = peeled.Hash()
			}
			out[n] = h.String()
		}
		return nil
	})
	if errors.Is(err, errEmptyRemote) {
		return map[string]string{}, nil
	}
	return out, err
}
