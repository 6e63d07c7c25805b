package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/forge"
)

// planComment says where `flotilla plan --comment N` posts: one comment per
// application on pull request (GitLab: merge request) N, found again by
// its hidden marker and edited in place on every push.
type planComment struct {
	// Number is the pull request; 0 posts nothing.
	Number int
	// Kind, API, Repo and TokenFile name the forge. Default: the
	// application's feedback.forge in --config.
	Kind, API, Repo, TokenFile string
}

// forge returns the forge to post to for app: the flags, or what its
// feedback declares.
func (c planComment) forge(app *application.Application) (planComment, error) {
	if app != nil && app.Feedback != nil && app.Feedback.Forge != nil {
		f := app.Feedback.Forge
		if c.Kind == "" {
			c.Kind = f.Kind
		}
		if c.API == "" {
			c.API = f.API
		}
		if c.Repo == "" {
			c.Repo = app.Feedback.ForgeRepo(app.Source.RepoURL)
		}
		if c.TokenFile == "" {
			c.TokenFile = f.TokenFile
		}
	}
	switch {
	case c.Kind != forge.GitHub && c.Kind != forge.Gitea && c.Kind != forge.GitLab:
		return c, fmt.Errorf("--forge %q: use github, gitea or gitlab", c.Kind)
	case c.API == "" || c.Repo == "" || c.TokenFile == "":
		return c, errors.New("--comment needs --forge-api, --forge-repo and --forge-token-file, or an application whose feedback.forge in --config names them")
	}
	return c, nil
}

// postPlanComments posts each application's plan (both of its sides)
// to the pull request.
func postPlanComments(ctx context.Context, o planOptions, plans []appPlan, head string, w io.Writer) error {
	byApp := map[string]*application.Application{}
	if o.Config != "" {
		f, err := application.Load(o.Config)
		if err != nil {
			return err
		}
		for i := range f.Applications {
			byApp[f.Applications[i].Name] = &f.Applications[i]
		}
	}
	var order []string
	grouped := map[string][]appPlan{}
	for _, p := range plans {
		if _, ok := grouped[p.App]; !ok {
			order = append(order, p.App)
		}
		grouped[p.App] = append(grouped[p.App], p)
	}
	for _, app := range order {
		c, err := o.Comment.forge(byApp[app])
		if err != nil {
			return fmt.Errorf("application %q: %w", app, err)
		}
		token, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return fmt.Errorf("application %q: --forge-token-file: %w", app, err)
		}
		var b bytes.Buffer
		printPlanMarkdown(&b, grouped[app], head)
		client := &forge.Client{Kind: c.Kind, API: c.API, Token: strings.TrimSpace(string(token))}
		res, err := client.UpsertComment(ctx, c.Repo, c.Number, forge.PlanMarker(app), b.String())
		if err != nil {
			return fmt.Errorf("application %q: %w", app, err)
		}
		switch {
		case res.Created:
			fmt.Fprintf(w, "%s: plan commented on %s#%d\n", app, c.Repo, c.Number)
		case res.Unchanged:
			fmt.Fprintf(w, "%s: plan comment on %s#%d already up to date\n", app, c.Repo, c.Number)
		default:
			fmt.Fprintf(w, "%s: plan comment on %s#%d updated\n", app, c.Repo, c.Number)
		}
	}
	return nil
}
