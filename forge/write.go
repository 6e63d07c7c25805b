package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// GitLab is the kind of a GitLab API (https://gitlab.com/api/v4). It is
// spoken for feedback (commit statuses, merge request notes) only: pull
// request previews read GitHub and Gitea.
const GitLab = "gitlab"

// MaxWriteAnswer bounds what is read of the answer to one write: the
// forge echoes the status or comment, which is all the client needs.
const MaxWriteAnswer = 1 << 20

// ValidFeedbackRepo reports whether repo names a project on a forge of
// kind: owner/name, or on GitLab group/subgroup/.../name.
func ValidFeedbackRepo(kind, repo string) bool {
	if kind != GitLab {
		return ValidRepo(repo)
	}
	parts := strings.Split(repo, "/")
	if len(parts) < 2 || len(parts) > 20 {
		return false
	}
	for _, p := range parts {
		if !validName(p) {
			return false
		}
	}
	return true
}

// base checks c.API and returns it parsed. The token is only ever sent to
// URLs built from it.
func (c *Client) base() (*url.URL, error) {
	base, err := url.Parse(strings.TrimSuffix(c.API, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" || base.User != nil {
		return nil, fmt.Errorf("forge: API %q is not an http(s) URL", c.API)
	}
	base.RawQuery, base.Fragment = "", ""
	return base, nil
}

// projectPath is the path of repo's API under the base: /repos/owner/name,
// or GitLab's /projects/<url-encoded path>.
func (c *Client) projectPath(repo string) (raw, escaped string, err error) {
	if !ValidFeedbackRepo(c.Kind, repo) {
		return "", "", fmt.Errorf("forge: %q is not a repository path for %s", repo, c.Kind)
	}
	switch c.Kind {
	case GitHub, Gitea:
		owner, name, _ := strings.Cut(repo, "/")
		return "/repos/" + owner + "/" + name, "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name), nil
	case GitLab:
		// GitLab takes a project's path as its id, with its slashes
		// escaped: /projects/group%2Fname.
		return "/projects/" + repo, "/projects/" + url.PathEscape(repo), nil
	}
	return "", "", fmt.Errorf("forge: unknown kind %q", c.Kind)
}

// endpoint is base + path, with the escaped form kept so that GitLab's
// %2F survives.
func endpoint(base *url.URL, raw, escaped string, q url.Values) string {
	u := *base
	u.Path = base.Path + raw
	u.RawPath = base.EscapedPath() + escaped
	if q != nil {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// do sends one request with the token and reads at most limit bytes of the
// answer. A status outside 2xx is an error that names what was being done,
// never the token. The caller bounds ctx.
func (c *Client) do(ctx context.Context, method, u, what string, body any, limit int64) ([]byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, fmt.Errorf("forge: %s: %w", what, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("forge: %s: %w", what, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "flotilla")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch c.Kind {
	case GitHub:
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	}
	if c.Token != "" {
		if c.Kind == GitLab {
			req.Header.Set("PRIVATE-TOKEN", c.Token)
		} else {
			req.Header.Set("Authorization", "token "+c.Token)
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = noRedirects
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("forge: %s: %w", what, redact(err, c.Token))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("forge: %s: %w", what, redact(err, c.Token))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, nil, &StatusError{Op: what, Code: resp.StatusCode}
	}
	if int64(len(b)) > limit {
		return nil, nil, fmt.Errorf("forge: %s: an answer over %d bytes: %w", what, limit, ErrTooLarge)
	}
	return b, resp.Header, nil
}

// StatusError is a forge's answer outside 2xx. It carries the code only:
// a forge's error body may quote the request.
type StatusError struct {
	Op   string
	Code int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("forge: %s: %d %s", e.Op, e.Code, http.StatusText(e.Code))
}

// redact removes the token from an error's text, in case a transport ever
// quotes a header.
func redact(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return &redacted{msg: strings.ReplaceAll(err.Error(), token, "<token>"), err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// timeout bounds one whole operation (all its pages and writes).
func (c *Client) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	d := c.Timeout
	if d <= 0 {
		d = Timeout
	}
	return context.WithTimeout(ctx, d)
}
