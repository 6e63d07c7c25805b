package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/redact"
)

// maxURLFile bounds what is read of a URL file: a URL, not a disk image
// mounted by mistake.
const maxURLFile = 8 << 10

// permanentError is a failure that trying again cannot fix: the receiver
// refused the request (4xx other than 429), or the URL is missing or unusable.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// deliver POSTs body until it is accepted, the failure is permanent, the
// attempts run out or ctx ends. It returns how many attempts it made.
func (s *sink) deliver(ctx context.Context, log *slog.Logger, body []byte) (int, error) {
	o := &s.d.opts
	for attempt := 1; ; attempt++ {
		retryAfter, err := s.attempt(ctx, body)
		if err == nil {
			return attempt, nil
		}
		var perm *permanentError
		if errors.As(err, &perm) || ctx.Err() != nil {
			return attempt, err
		}
		if attempt >= o.MaxAttempts {
			return attempt, fmt.Errorf("after %d attempts: %w", attempt, err)
		}
		wait := backoff(o.Backoff, attempt)
		if retryAfter > 0 {
			if retryAfter > o.Backoff.Max {
				return attempt, fmt.Errorf("receiver asked to retry after %s, longer than the %s limit: %w", retryAfter, o.Backoff.Max, err)
			}
			wait = retryAfter
		}
		log.Debug("notification delivery failed; retrying", "attempt", attempt, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return attempt, ctx.Err()
		case <-o.Clock.After(wait):
		}
	}
}

// attempt makes one request. A retryable failure may come with the wait the
// receiver asked for.
func (s *sink) attempt(ctx context.Context, body []byte) (retryAfter time.Duration, err error) {
	raw, err := s.url()
	if err != nil {
		return 0, &permanentError{err}
	}
	ctx, cancel := context.WithTimeout(ctx, s.d.opts.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, raw, bytes.NewReader(body))
	if err != nil {
		return 0, &permanentError{scrub(err, raw)}
	}
	for _, h := range s.headers {
		req.Header.Add(h.Name, h.Value)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "flotilla-notify")
	resp, err := s.d.opts.HTTPClient.Do(req)
	if err != nil {
		return 0, scrub(err, raw)
	}
	defer resp.Body.Close()
	// A little of the body explains a refusal (Slack answers
	// "invalid_payload", "no_service"); draining it lets the connection be
	// reused.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))

	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return 0, nil
	case code == http.StatusTooManyRequests || code >= 500:
		return parseRetryAfter(resp.Header.Get("Retry-After"), s.d.opts.Clock.Now()),
			&statusError{code: code, detail: scrubText(string(head), raw)}
	default:
		return 0, &permanentError{&statusError{code: code, detail: scrubText(string(head), raw)}}
	}
}

// statusError is a response outside 2xx.
type statusError struct {
	code   int
	detail string // the start of the body, sanitised
}

func (e *statusError) Error() string {
	msg := "receiver answered " + strconv.Itoa(e.code) + " " + http.StatusText(e.code)
	if d := strings.Join(strings.Fields(e.detail), " "); d != "" {
		msg += ": " + d
	}
	return msg
}

// url reads the sink's URL now, so that a rotated secret is picked up by
// the next delivery. Its errors never quote the URL.
func (s *sink) url() (string, error) {
	var raw string
	if s.urlFile != "" {
		// Opening a named pipe would wait for a writer, with no deadline.
		if info, err := os.Stat(s.urlFile); err != nil {
			return "", fmt.Errorf("read the URL: %w", err)
		} else if !info.Mode().IsRegular() {
			return "", fmt.Errorf("read the URL: %s is not a regular file", s.urlFile)
		}
		f, err := os.Open(s.urlFile)
		if err != nil {
			return "", fmt.Errorf("read the URL: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxURLFile))
		f.Close()
		if err != nil {
			return "", fmt.Errorf("read the URL from %s: %w", s.urlFile, err)
		}
		if raw = strings.TrimSpace(string(b)); raw == "" {
			return "", fmt.Errorf("the URL file %s is empty", s.urlFile)
		}
	} else if raw = strings.TrimSpace(os.Getenv(s.urlEnv)); raw == "" {
		return "", fmt.Errorf("environment variable %s holding the URL is empty or unset", s.urlEnv)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", errors.New("the configured URL is not an http or https URL with a host")
	}
	return raw, nil
}

// scrub returns err with the sink URL and anything else secret-looking
// removed from its message. The URL's path alone is a credential for Slack,
// so it is cut wherever it appears, not only as part of the whole URL.
func scrub(err error, raw string) error {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		// "Post \"https://…\": dial tcp …": the operation and the cause,
		// without the URL between them.
		msg = ue.Op + ": " + ue.Err.Error()
	}
	return &scrubbedError{msg: scrubText(msg, raw), err: err}
}

func scrubText(s, raw string) string {
	if raw == "" || s == "" {
		return redact.Text(s)
	}
	s = strings.ReplaceAll(s, raw, "<url>")
	if u, err := url.Parse(raw); err == nil {
		for _, part := range []string{u.EscapedPath(), u.Path, u.RawQuery, u.Fragment, u.User.String()} {
			if len(part) > 1 {
				s = strings.ReplaceAll(s, part, redact.Mark)
			}
		}
	}
	return redact.Text(s)
}

// scrubbedError shows a message without the URL and keeps the original for
// errors.Is only (context.DeadlineExceeded and the like).
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// backoff is the wait after the given number of failures: Min doubled per
// failure up to Max, then drawn from its upper half.
func backoff(b Backoff, failures int) time.Duration {
	d := b.Min
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	return half + rand.N(d-half+1)
}

// maxRetryAfter caps the seconds form before it becomes a Duration, where a
// huge number would overflow.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads Retry-After in either of its forms, seconds or an
// HTTP date, and returns 0 when it is absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return min(time.Duration(min(secs, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
