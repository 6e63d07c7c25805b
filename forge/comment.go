package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// MaxCommentBytes bounds a comment's body: GitHub refuses more than 65536
// characters, and a plan that long is better read with `flotilla plan`.
const MaxCommentBytes = 60000

// PlanMarker is the hidden first line of the plan comment of app: how the
// comment is found again to be edited in place.
func PlanMarker(app string) string { return "<!-- flotilla-plan:" + app + " -->" }

// CommentResult says what UpsertComment did.
type CommentResult struct {
	ID int64
	// Created is true for a new comment, false for one edited in place.
	Created bool
	// Unchanged is true when the comment already said the same; nothing
	// was written.
	Unchanged bool
}

// comment is the part of a comment or note the three APIs share, plus
// GitLab's own author and system fields.
type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User *struct {
		Login string `json:"login"`
	} `json:"user"`
	Author *struct {
		Username string `json:"username"`
	} `json:"author"`
	System bool `json:"system"`
}

func (c *comment) author() string {
	switch {
	case c.User != nil:
		return c.User.Login
	case c.Author != nil:
		return c.Author.Username
	}
	return ""
}

// UpsertComment makes the comment of pull request (GitLab: merge request)
// number that starts with marker say body: the comment the token's own
// user wrote with that marker is edited in place, or one is created when
// there is none. A marker in someone else's comment is ignored, so nobody
// can make the controller edit their comment or hide its own.
//
// Gitea/Forgejo and GitHub: GET and POST /repos/{owner}/{repo}/issues/{n}/comments,
// PATCH /repos/{owner}/{repo}/issues/comments/{id}. GitLab: GET and POST
// /projects/{id}/merge_requests/{iid}/notes, PUT .../notes/{note_id}.
func (c *Client) UpsertComment(ctx context.Context, repo string, number int, marker, body string) (CommentResult, error) {
	if number <= 0 {
		return CommentResult{}, fmt.Errorf("forge: comment on %s: pull request number %d", repo, number)
	}
	if !strings.HasPrefix(marker, "<!--") || !strings.HasSuffix(marker, "-->") || strings.ContainsAny(marker, "\r\n") || len(marker) > 200 {
		return CommentResult{}, fmt.Errorf("forge: comment on %s: marker %q is not a one-line HTML comment", repo, marker)
	}
	base, err := c.base()
	if err != nil {
		return CommentResult{}, err
	}
	raw, esc, err := c.projectPath(repo)
	if err != nil {
		return CommentResult{}, err
	}
	text := marker + "\n" + body
	if len(text) > MaxCommentBytes {
		cut := MaxCommentBytes - 200
		for cut > 0 && !utf8Start(text[cut]) {
			cut--
		}
		text = text[:cut] + "\n\n… (cut: the whole plan is longer than a comment may be; run `flotilla plan`)\n"
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	me, err := c.whoami(ctx, base)
	if err != nil {
		return CommentResult{}, err
	}
	n := strconv.Itoa(number)
	thread, threadEsc := raw+"/issues/"+n+"/comments", esc+"/issues/"+n+"/comments"
	if c.Kind == GitLab {
		thread, threadEsc = raw+"/merge_requests/"+n+"/notes", esc+"/merge_requests/"+n+"/notes"
	}
	what := fmt.Sprintf("comments of %s#%d", repo, number)
	found, err := c.findComment(ctx, base, thread, threadEsc, what, marker, me)
	if err != nil {
		return CommentResult{}, err
	}
	payload := map[string]string{"body": text}
	if found == nil {
		b, _, err := c.do(ctx, http.MethodPost, endpoint(base, thread, threadEsc, nil), "create a comment on "+repo+"#"+n, payload, MaxWriteAnswer)
		if err != nil {
			return CommentResult{}, err
		}
		var out comment
		if err := json.Unmarshal(b, &out); err != nil {
			return CommentResult{}, fmt.Errorf("forge: create a comment on %s#%d: %w", repo, number, err)
		}
		return CommentResult{ID: out.ID, Created: true}, nil
	}
	if found.Body == text {
		return CommentResult{ID: found.ID, Unchanged: true}, nil
	}
	id := strconv.FormatInt(found.ID, 10)
	method, p, pe := http.MethodPatch, raw+"/issues/comments/"+id, esc+"/issues/comments/"+id
	if c.Kind == GitLab {
		method, p, pe = http.MethodPut, thread+"/"+id, threadEsc+"/"+id
	}
	if _, _, err := c.do(ctx, method, endpoint(base, p, pe, nil), "edit comment "+id+" on "+repo+"#"+n, payload, MaxWriteAnswer); err != nil {
		return CommentResult{}, err
	}
	return CommentResult{ID: found.ID}, nil
}

// whoami returns the login of the token's user (GET /user on all three).
func (c *Client) whoami(ctx context.Context, base *url.URL) (string, error) {
	if c.Token == "" {
		return "", errors.New("forge: a comment needs a token")
	}
	b, _, err := c.do(ctx, http.MethodGet, endpoint(base, "/user", "/user", nil), "read the token's user", nil, MaxWriteAnswer)
	if err != nil {
		return "", err
	}
	var u struct {
		Login    string `json:"login"`
		Username string `json:"username"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		return "", fmt.Errorf("forge: read the token's user: %w", err)
	}
	if u.Login == "" {
		u.Login = u.Username
	}
	if u.Login == "" {
		return "", errors.New("forge: read the token's user: the answer names none")
	}
	return u.Login, nil
}

// findComment pages through a thread for the first comment by me that
// starts with marker. Pages are counted here, never taken from an answer;
// Gitea lists a thread whole in one answer and ignores paging, so a page
// that brings no comment not seen before ends the listing too.
func (c *Client) findComment(ctx context.Context, base *url.URL, thread, threadEsc, what, marker, me string) (*comment, error) {
	seen := map[int64]bool{}
	for page := 1; ; page++ {
		if page > MaxPages {
			return nil, fmt.Errorf("forge: %s: more than %d pages: %w", what, MaxPages, ErrTooLarge)
		}
		per := 100
		q := url.Values{"page": {strconv.Itoa(page)}, "per_page": {strconv.Itoa(per)}}
		switch c.Kind {
		case Gitea:
			q = nil
		case GitLab:
			q.Set("sort", "asc")
		}
		b, _, err := c.do(ctx, http.MethodGet, endpoint(base, thread, threadEsc, q), "list "+what, nil, MaxPageBytes)
		if err != nil {
			return nil, err
		}
		cs, err := decodeComments(b)
		if err != nil {
			return nil, fmt.Errorf("forge: list %s: %w", what, err)
		}
		found, fresh := pickComment(cs, seen, marker, me)
		if found != nil {
			return found, nil
		}
		if c.Kind == Gitea || len(cs) < per || fresh == 0 {
			return nil, nil
		}
	}
}

// decodeComments reads one page of comments or notes.
func decodeComments(body []byte) ([]comment, error) {
	var cs []comment
	if err := json.Unmarshal(body, &cs); err != nil {
		return nil, err
	}
	return cs, nil
}

// pickComment returns the first comment of cs not seen before that me
// wrote (not a GitLab system note) and that starts with marker, and how
// many of cs were new.
func pickComment(cs []comment, seen map[int64]bool, marker, me string) (*comment, int) {
	fresh := 0
	for i := range cs {
		cm := &cs[i]
		if seen[cm.ID] || cm.ID <= 0 {
			continue
		}
		seen[cm.ID] = true
		fresh++
		if me != "" && !cm.System && strings.EqualFold(cm.author(), me) && strings.HasPrefix(cm.Body, marker) {
			return cm, fresh
		}
	}
	return nil, fresh
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
