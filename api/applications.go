package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/access"
	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/redact"
)

func (s *server) listApplications(w http.ResponseWriter, r *http.Request) error {
	statuses := s.ctl.Statuses()
	list := ApplicationList{Items: make([]ApplicationSummary, 0, len(statuses))}
	for _, st := range statuses {
		if s.canRead(r, st.Name) {
			if strings.Contains(st.LastError, application.HookLogsMarker) && !s.mayReadHookLogs(r, st.Name) {
				st = statusWithoutHookLogs(st)
			}
			sum := summarize(st)
			sum.Project = s.opts.Policy.Project(st.Name)
			list.Items = append(list.Items, sum)
		}
	}
	if s.opts.ConfigProblem != nil && s.canRead(r, "") {
		list.ConfigProblem = s.opts.ConfigProblem()
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// summarize drops the detail of a status that only its own page shows (per
// service and per hook, the field-by-field drift and what was corrected,
// the sweep's report), keeping counts: the list of thousands of
// applications is read on every console load, and the sweep's report of
// what it kept and why alone can outweigh the rest of a status.
func summarize(st application.Status) ApplicationSummary {
	sum := ApplicationSummary{ServiceCount: len(st.Services)}
	for _, svc := range st.Services {
		if svc.Health == application.Healthy || svc.Health == application.Suspended {
			sum.ServicesHealthy++
		}
	}
	st.Services, st.Hooks = nil, nil
	st.Drift, st.Corrected, st.Sweep = nil, nil, nil
	sum.Status = st
	return sum
}

// lookup returns the named application's status or a 404.
func (s *server) lookup(r *http.Request) (application.Status, error) {
	name := r.PathValue("name")
	st, ok := s.ctl.Status(name)
	if !ok {
		return st, noApplication(name)
	}
	return st, nil
}

func (s *server) getApplication(w http.ResponseWriter, r *http.Request) error {
	st, err := s.lookup(r)
	if err != nil {
		return err
	}
	if !s.mayReadHookLogs(r, st.Name) {
		st = statusWithoutHookLogs(st)
	}
	w.Header().Set(OperateHeader, strconv.FormatBool(s.callerMay(r, access.Operate, st.Name)))
	writeJSON(w, http.StatusOK, st)
	return nil
}

// OperateHeader says on GET …/applications/{name} whether the caller may
// operate the application ("true" or "false"): sync, refresh, rollback and
// the rollout commands. The console shows the rollout buttons only to a
// caller who may use them; the routes themselves still decide each write.
const OperateHeader = "X-Flotilla-Operate"

func (s *server) getHistory(w http.ResponseWriter, r *http.Request) error {
	st, err := s.lookup(r)
	if err != nil {
		return err
	}
	rs, err := history(r.Context(), s.ctl, st.Name)
	if err != nil {
		return fmt.Errorf("read history of %q: %w", st.Name, err)
	}
	if rs == nil {
		rs = []charts.Release{} // an empty list, not null
	}
	writeJSON(w, http.StatusOK, HistoryList{Items: rs})
	return nil
}

func (s *server) getDiff(w http.ResponseWriter, r *http.Request) error {
	st, err := s.lookup(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var d Diff
	if v := q.Get("revision"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errorf(http.StatusBadRequest, CodeBadRequest, "revision=%q is not a revision number of 1 or more; `flotilla app history %s` lists them", v, st.Name)
		}
		against := q.Get("against")
		if against == "" {
			against = AgainstDeclared
		}
		if against != AgainstDeclared && against != AgainstDeployed {
			return errorf(http.StatusBadRequest, CodeBadRequest, "against=%q is not %q or %q", against, AgainstDeclared, AgainstDeployed)
		}
		if d, err = diffRevision(r.Context(), s.ctl, st.Name, n, against); err != nil {
			return fmt.Errorf("diff %q against revision %d: %w", st.Name, n, err)
		}
	} else if v := q.Get("against"); v != "" {
		return errorf(http.StatusBadRequest, CodeBadRequest, "against=%q needs revision=N", v)
	} else {
		var err error
		if d, err = diff(r.Context(), s.ctl, st.Name); err != nil {
			return fmt.Errorf("diff %q: %w", st.Name, err)
		}
	}
	d.App = st.Name
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *server) postSync(w http.ResponseWriter, r *http.Request) error {
	st, err := s.lookup(r)
	if err != nil {
		return err
	}
	var body SyncBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	noteAudit(r, "prune", body.Prune)
	noteAudit(r, "dry_run", body.DryRun)
	if body.Revision != "" {
		noteAudit(r, "revision", body.Revision)
	}
	wait, timeout, err := s.waitParams(r)
	if err != nil {
		return err
	}
	p, _ := principalFrom(r.Context())
	done, err := s.ctl.RequestSync(st.Name, SyncOptions{By: p.Name, Prune: body.Prune, DryRun: body.DryRun, Revision: body.Revision})
	if err != nil {
		return fmt.Errorf("sync %q: %w", st.Name, err)
	}
	s.log.Info("sync requested", "app", st.Name, "by", p.Name, "role", p.Role,
		"prune", body.Prune, "dry_run", body.DryRun, "revision", body.Revision)
	return s.answer(w, r, st.Name, done, wait, timeout)
}

func (s *server) postRollback(w http.ResponseWriter, r *http.Request) error {
	st, err := s.lookup(r)
	if err != nil {
		return err
	}
	var body RollbackBody
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	noteAudit(r, "revision", body.Revision)
	if body.Revision < 1 {
		return errorf(http.StatusBadRequest, CodeBadRequest, "rollback needs a revision number of 1 or more; `flotilla app history %s` lists them", st.Name)
	}
	wait, timeout, err := s.waitParams(r)
	if err != nil {
		return err
	}
	p, _ := principalFrom(r.Context())
	done, err := rollback(r.Context(), s.ctl, st.Name, body.Revision, p.Name)
	if err != nil {
		return fmt.Errorf("rollback %q to revision %d: %w", st.Name, body.Revision, err)
	}
	s.log.Info("rollback requested", "app", st.Name, "by", p.Name, "role", p.Role, "revision", body.Revision)
	return s.answer(w, r, st.Name, done, wait, timeout)
}

func (s *server) postRefresh(w http.ResponseWriter, r *http.Request) error {
	st, err := s.lookup(r)
	if err != nil {
		return err
	}
	if err := s.ctl.Refresh(st.Name); err != nil {
		return fmt.Errorf("refresh %q: %w", st.Name, err)
	}
	p, _ := principalFrom(r.Context())
	s.log.Info("refresh requested", "app", st.Name, "by", p.Name, "role", p.Role)
	writeJSON(w, http.StatusAccepted, OperationResponse{App: st.Name, Phase: Queued, Time: s.now(),
		Message: "the application is due now; a manual one is planned, not applied"})
	return nil
}

// waitParams reads ?wait=true and ?timeout=DURATION.
func (s *server) waitParams(r *http.Request) (bool, time.Duration, error) {
	q := r.URL.Query()
	wait := false
	if v := q.Get("wait"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, 0, errorf(http.StatusBadRequest, CodeBadRequest, "wait=%q is not true or false", v)
		}
		wait = b
	}
	timeout := min(defaultWait, s.opts.MaxWait)
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return false, 0, errorf(http.StatusBadRequest, CodeBadRequest, "timeout=%q is not a positive duration such as 90s or 5m", v)
		}
		timeout = min(d, s.opts.MaxWait)
	}
	return wait, timeout, nil
}

// answer replies to a sync or rollback: at once with 202 Queued, or, when
// asked to wait, with the pass's result, or 202 Running if it took longer
// than timeout. The pass goes on either way.
func (s *server) answer(w http.ResponseWriter, r *http.Request, app string, done <-chan SyncResult, wait bool, timeout time.Duration) error {
	if !wait {
		writeJSON(w, http.StatusAccepted, OperationResponse{App: app, Phase: Queued, Time: s.now(),
			Message: "queued; `flotilla app get " + app + "` shows the outcome"})
		return nil
	}
	// A long wait must not be cut by the server's timeouts.
	liftWriteDeadline(w, time.Now().Add(timeout+10*time.Second))
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case res := <-done:
		// A pass the stop ended answers with its error at the moment
		// Stopping closes; which of the two select sees first is chance,
		// and the client must get the same 503 either way.
		if res.Err != nil && isClosed(s.opts.Stopping) {
			return stoppingError(app)
		}
		out := OperationResponse{App: app, Phase: Succeeded, Action: res.Action, Revision: res.Revision, Plan: res.Plan, Time: s.now()}
		if out.Plan != nil {
			out.Plan.App = app
		}
		st := res.Status
		if res.Err != nil {
			out.Phase = Failed
			out.Error = redact.Text(res.Err.Error())
		}
		if !s.mayReadHookLogs(r, app) {
			st = statusWithoutHookLogs(st)
			out.Error = cutHookLogs(out.Error)
		}
		out.Status = &st
		writeJSON(w, http.StatusOK, out)
	case <-t.C:
		writeJSON(w, http.StatusAccepted, OperationResponse{App: app, Phase: Running, Time: s.now(),
			Message: fmt.Sprintf("still running after %s; it goes on, watch `flotilla app get %s`", timeout, app)})
	case <-r.Context().Done():
		// The client left; the pass goes on without it.
	case <-s.opts.Stopping:
		return stoppingError(app)
	}
	return nil
}

func stoppingError(app string) *Error {
	return errorf(http.StatusServiceUnavailable, CodeUnavailable,
		"the controller is stopping; the pass ends at its next step boundary; `flotilla app get %s` shows the outcome once a controller runs again", app)
}

// isClosed reports whether ch is closed; a nil channel never is.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// decodeBody reads a small, strict JSON body into v. An empty body leaves v
// at its zero value, so a write without data is a plain request.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(http.StatusRequestEntityTooLarge, CodeBadRequest, "request body is larger than %d bytes", maxBodyBytes)
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "invalid JSON body: " + err.Error()}
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, CodeBadRequest, "invalid JSON body: more than one value")
	}
	return nil
}

func (s *server) healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz answers probes, which come every few seconds: a not-ready answer is
// written here and logged at debug, not through writeError's error log.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Ready != nil {
		if err := s.ready(r.Context()); err != nil {
			msg := "not ready: " + err.Error()
			if rd := s.readiness(); rd.Role != "" {
				msg = fmt.Sprintf("not ready (%s, epoch %d): %s", rd.Role, rd.Epoch, err)
			}
			e := classify(&Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: msg})
			s.log.DebugContext(r.Context(), "not ready", "error", e.Message)
			writeJSON(w, e.Status, e)
			return nil
		}
	}
	writeJSON(w, http.StatusOK, s.readiness())
	return nil
}

// ready runs the readiness check within ReadyTimeout. The check runs on its
// own goroutine so that one ignoring its context still cannot hold the
// probe past the deadline; it then ends on its own, its answer dropped.
func (s *server) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReadyTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.opts.Ready(ctx) }()
	select {
	case err := <-done:
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("readiness check did not answer within %s: %w", s.opts.ReadyTimeout, err)
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("readiness check did not answer within %s", s.opts.ReadyTimeout)
	}
}

func (s *server) listSwarms(w http.ResponseWriter, r *http.Request) error {
	items, err := swarmList(r.Context(), s.ctl)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SwarmList{Items: items})
	return nil
}
