// Package forgepost posts what the controller deploys back to the forge
// the commits came from, for applications whose feedback asks for it
// (application.Feedback): a commit status per application and commit
// (pending when a sync starts, then success or failure), and the
// application's plan as one pull request comment, edited in place.
//
// It reads the event stream like the notification sinks do, so the
// reconcile pass knows nothing of forges and never waits for one: each
// forge has its own bounded queue, goroutine and token bucket, and a forge
// that is slow, down or refusing costs a logged warning and a count, never
// a deploy. The token is read from its file at every post and appears in
// no log, error or event.
package forgepost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/forge"
	"github.com/flotilla-gitops/flotilla/redact"
)

// Defaults for Options.
const (
	// DefaultRate is how many posts per second one forge gets: a few, well
	// under GitHub's secondary limits for content-creating requests.
	DefaultRate       = 2
	DefaultBurst      = 4
	DefaultQueueSize  = 200
	DefaultTimeout    = 15 * time.Second
	DefaultAttempts   = 3
	DefaultRetryAfter = 2 * time.Second
)

// Options configure a Poster. Zero fields take their defaults.
type Options struct {
	// Logger gets failures and drops, with component=forgepost. Default
	// slog.Default().
	Logger *slog.Logger
	// HTTP sends the requests. Default: a client that follows no
	// redirect, so the token never leaves the configured API origin.
	HTTP *http.Client
	// Apps returns an application's current configuration by name; the
	// controller's applications change with every reload. Required.
	Apps func(name string) (application.Application, bool)
	// ConsoleURL is the controller's public base URL; a status links to
	// the application's page in its console (ConsoleURL/ui/#/app/<name>).
	// Default: no link.
	ConsoleURL string
	// Plan returns the markdown plan of app at commit for its pull request
	// comment: what the deploy changed when deployed is true, what a sync
	// would change otherwise. Default: the comment reports the outcome
	// without a plan.
	Plan func(ctx context.Context, app, commit string, deployed bool) (string, error)
	// Rate and Burst shape each forge's token bucket. Default DefaultRate
	// per second, DefaultBurst.
	Rate  rate.Limit
	Burst int
	// QueueSize bounds the posts one forge holds; when full the oldest is
	// dropped (counted). Default DefaultQueueSize.
	QueueSize int
	// Timeout bounds one post, every request of it. Default DefaultTimeout.
	Timeout time.Duration
	// Attempts is how many times a post that failed for a reason that may
	// pass (a 5xx, 429, a network error) is tried. Default DefaultAttempts.
	Attempts int
	// RetryAfter is the wait between attempts. Default DefaultRetryAfter.
	RetryAfter time.Duration
	// OnPost, when set, is told the outcome of every post ("status" or
	// "comment"; "ok", "failed" or "dropped"), for metrics.
	OnPost func(kind, result string)
}

// Stats count what became of the posts since New.
type Stats struct {
	Posted, Failed, Dropped, Skipped uint64
}

// Poster posts feedback for the events it reads. Build it with New and
// start it with Run.
type Poster struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	queues map[string]*queue // by API origin
	// last is the newest status posted per application, so that a repeat
	// costs nothing and a later pass's failure at a commit already
	// deployed does not turn its status red.
	last map[string]posted
	wg   sync.WaitGroup
	ctx  context.Context

	posted, failed, dropped, skipped atomic.Uint64
}

type posted struct {
	commit string
	state  forge.State
}

// New returns a Poster; it posts nothing until Run.
func New(opts Options) (*Poster, error) {
	if opts.Apps == nil {
		return nil, errors.New("forgepost: Options.Apps is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.Rate <= 0 {
		opts.Rate = DefaultRate
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Attempts <= 0 {
		opts.Attempts = DefaultAttempts
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = DefaultRetryAfter
	}
	if opts.ConsoleURL != "" {
		u, err := url.Parse(opts.ConsoleURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			return nil, fmt.Errorf("forgepost: console URL %q is not an http(s) URL", opts.ConsoleURL)
		}
	}
	return &Poster{opts: opts, log: opts.Logger.With("component", "forgepost"),
		queues: map[string]*queue{}, last: map[string]posted{}}, nil
}

// Stats returns the counters.
func (p *Poster) Stats() Stats {
	return Stats{Posted: p.posted.Load(), Failed: p.failed.Load(), Dropped: p.dropped.Load(), Skipped: p.skipped.Load()}
}

// Run posts for the events published on b from now on until ctx ends. It
// returns when every forge's goroutine has stopped; posts still queued
// are dropped.
func (p *Poster) Run(ctx context.Context, b *events.Broker) {
	ctx, cancel := context.WithCancel(ctx)
	p.mu.Lock()
	p.ctx = ctx
	for _, q := range p.queues {
		p.wg.Go(func() { p.run(ctx, q) })
	}
	p.mu.Unlock()
	defer func() {
		cancel()
		p.wg.Wait()
	}()
	var last uint64
	for {
		ch, stop := b.Subscribe(ctx, last)
		lagged := false
		for e := range ch {
			if e.Type == events.Lagged {
				last, lagged = e.ID, true
				break
			}
			last = e.ID
			p.handle(e)
		}
		stop()
		if !lagged || ctx.Err() != nil {
			return
		}
		p.log.Warn("event stream fell behind; resuming from the last event seen", "after", last)
	}
}

// handle queues what event e asks of the forge of its application, if
// anything, without waiting.
func (p *Poster) handle(e events.Event) {
	var state forge.State
	switch e.Type {
	case events.SyncStarted:
		state = forge.StatePending
	case events.SyncSucceeded:
		state = forge.StateSuccess
	case events.SyncFailed:
		state = forge.StateFailure
	default:
		return
	}
	if e.App == "" || e.Revision == "" {
		return
	}
	app, ok := p.opts.Apps(e.App)
	if !ok || app.Feedback == nil || app.Feedback.Forge == nil {
		return
	}
	fb := app.Feedback
	f := *fb.Forge
	repo := fb.ForgeRepo(app.Source.RepoURL)
	n := fb.PullRequestNumber()
	if !fb.Statuses && n == 0 {
		return
	}
	stalled, _ := e.Data["kind"].(string)
	if !p.wantPost(e.App, e.Revision, state, stalled == "stalled") {
		return
	}
	if fb.Statuses {
		p.push(job{kind: "status", forge: f, app: e.App, repo: repo, commit: e.Revision, state: state, message: e.Message})
	}
	if n > 0 && state != forge.StatePending {
		p.push(job{kind: "comment", forge: f, app: e.App, repo: repo, commit: e.Revision, state: state, message: e.Message, pr: n})
	}
}

// wantPost decides whether an outcome is worth posting (a status, the
// comment) and notes it as the newest. A failure is the deploy's when this poster saw its sync
// start, or when the commit itself is bad (a stalled pass: it does not
// render, a guard refuses it); any other failure belongs to a pass that
// found nothing to deploy and failed to read something, which says
// nothing about the commit.
func (p *Poster) wantPost(app, commit string, state forge.State, stalled bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, ok := p.last[app]
	started := ok && prev.commit == commit && prev.state == forge.StatePending
	if (ok && prev.commit == commit && prev.state == state) || (state == forge.StateFailure && !started && !stalled) {
		p.skipped.Add(1)
		return false
	}
	p.last[app] = posted{commit: commit, state: state}
	return true
}

// job is one post.
type job struct {
	kind string // "status" or "comment"
	// forge is as the application declared it when the event came: two
	// applications on one forge may hold different tokens.
	forge   application.Forge
	app     string
	repo    string
	commit  string
	state   forge.State
	message string
	pr      int
}

// queue is one forge's: its posts, in order, and its token bucket.
type queue struct {
	limiter *rate.Limiter
	mu      sync.Mutex
	jobs    []job
	wake    chan struct{}
}

// push queues j on its forge's queue without waiting, starting the forge's
// goroutine on its first post.
func (p *Poster) push(j job) {
	f := j.forge
	key := f.Kind + " " + f.API
	p.mu.Lock()
	q, ok := p.queues[key]
	if !ok {
		q = &queue{limiter: rate.NewLimiter(p.opts.Rate, p.opts.Burst), wake: make(chan struct{}, 1)}
		p.queues[key] = q
		if p.ctx != nil {
			ctx := p.ctx
			p.wg.Go(func() { p.run(ctx, q) })
		}
	}
	p.mu.Unlock()
	q.mu.Lock()
	if len(q.jobs) >= p.opts.QueueSize {
		dropped := q.jobs[0]
		q.jobs = q.jobs[1:]
		p.dropped.Add(1)
		p.observe(dropped.kind, "dropped")
		p.log.Warn("forge feedback queue full; dropped the oldest post", "app", dropped.app, "forge", f.API, "kind", dropped.kind)
	}
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run posts one forge's queue in order, at its bucket's pace.
func (p *Poster) run(ctx context.Context, q *queue) {
	for {
		q.mu.Lock()
		var j job
		ok := len(q.jobs) > 0
		if ok {
			j = q.jobs[0]
			q.jobs = q.jobs[1:]
		}
		q.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
				continue
			}
		}
		p.post(ctx, q.limiter, j)
		if ctx.Err() != nil {
			return
		}
	}
}

// post makes one post, retrying what may pass, and logs its failure.
func (p *Poster) post(ctx context.Context, lim *rate.Limiter, j job) {
	f := j.forge
	log := p.log.With("app", j.app, "revision", j.commit, "forge", f.API, "kind", j.kind)
	var err error
	for attempt := 1; attempt <= p.opts.Attempts; attempt++ {
		if err = lim.Wait(ctx); err != nil {
			return // shutting down
		}
		err = p.once(ctx, f, j)
		if err == nil || ctx.Err() != nil || !retryable(err) || attempt == p.opts.Attempts {
			break
		}
		log.Debug("forge post failed; retrying", "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.opts.RetryAfter):
		}
	}
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		// Let the next event of this commit try again.
		p.mu.Lock()
		if prev := p.last[j.app]; prev.commit == j.commit && prev.state == j.state {
			delete(p.last, j.app)
		}
		p.mu.Unlock()
		log.Warn("forge feedback not posted; the deploy is not affected", "error", err)
		p.failed.Add(1)
		p.observe(j.kind, "failed")
		return
	}
	log.Debug("forge feedback posted", "state", string(j.state))
	p.posted.Add(1)
	p.observe(j.kind, "ok")
}

func (p *Poster) observe(kind, result string) {
	if p.opts.OnPost != nil {
		p.opts.OnPost(kind, result)
	}
}

// once makes one attempt of j, bounded by the post timeout.
func (p *Poster) once(ctx context.Context, f application.Forge, j job) error {
	token, err := readToken(f.TokenFile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	c := &forge.Client{Kind: f.Kind, API: f.API, Token: token, HTTP: p.opts.HTTP, Timeout: p.opts.Timeout}
	switch j.kind {
	case "status":
		err = c.SetStatus(ctx, j.repo, j.commit, forge.CommitStatus{
			State: j.state, Context: "flotilla/" + j.app, Description: describe(j), TargetURL: p.link(j.app),
		})
	case "comment":
		_, err = c.UpsertComment(ctx, j.repo, j.pr, forge.PlanMarker(j.app), p.commentBody(ctx, j))
	}
	if err != nil {
		// Errors of forge never hold the token; scrub anyway, in case a
		// transport one day quotes a header.
		return scrub(err, token)
	}
	return nil
}

// describe is a status's description: the outcome and the controller's
// own words about it.
func describe(j job) string {
	short := j.commit
	if len(short) > 12 {
		short = short[:12]
	}
	msg := redact.Text(j.message)
	switch j.state {
	case forge.StatePending:
		return "deploying " + short + ": " + msg
	case forge.StateSuccess:
		return "deployed " + short + ": " + msg
	}
	return "deploy of " + short + " failed: " + msg
}

// link is the application's page in the console, or "".
func (p *Poster) link(app string) string {
	if p.opts.ConsoleURL == "" {
		return ""
	}
	return strings.TrimSuffix(p.opts.ConsoleURL, "/") + "/ui/#/app/" + url.PathEscape(app)
}

// commentBody is the plan comment: the outcome, the link and the plan.
func (p *Poster) commentBody(ctx context.Context, j job) string {
	var b strings.Builder
	short := j.commit
	if len(short) > 12 {
		short = short[:12]
	}
	outcome := "deployed"
	if j.state == forge.StateFailure {
		outcome = "**failed**"
	}
	fmt.Fprintf(&b, "**flotilla** `%s` at `%s`: %s", j.app, short, outcome)
	if l := p.link(j.app); l != "" {
		fmt.Fprintf(&b, " ([console](%s))", l)
	}
	b.WriteString("\n\n")
	if j.state == forge.StateFailure && j.message != "" {
		fmt.Fprintf(&b, "> %s\n\n", mdQuote(redact.Text(j.message)))
	}
	if p.opts.Plan != nil {
		plan, err := p.opts.Plan(ctx, j.app, j.commit, j.state == forge.StateSuccess)
		switch {
		case err != nil:
			p.log.Warn("plan for the pull request comment not made; the comment reports the outcome only", "app", j.app, "error", redact.Text(err.Error()))
			b.WriteString("_The plan could not be made: see the controller's log._\n")
		default:
			b.WriteString(plan)
		}
	}
	return b.String()
}

// mdQuote keeps s on one quoted line that cannot open HTML or a mention
// of the marker.
func mdQuote(s string) string {
	return strings.NewReplacer("\n", " ", "<", "&lt;", ">", "&gt;", "@", "@\u200b").Replace(s)
}

// readToken reads a token file at every post, so a rotated token needs no
// restart.
func readToken(path string) (string, error) { return forge.ReadTokenFile(path) }

// retryable says whether trying again may help: a 5xx or 429, or no
// answer at all. A refusal, a bad setting or an oversized answer stays.
func retryable(err error) bool {
	var se *forge.StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 || se.Code == http.StatusTooManyRequests
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

// scrub removes token from err's text.
func scrub(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "<token>"))
}
