package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// webhookResult is commit-to-applied through a webhook, per commit.
type webhookResult struct {
	Commits    int
	Controller []time.Duration // webhook POST to the service update answered
	Visible    []time.Duration // webhook POST to the new spec read back
	Swarm      []time.Duration // update answered to a task of the new spec running
	Total      []time.Duration // push done to that task running
	PeakMB     float64         // the controller's VmHWM at the end
}

const webhookSecret = "scale-bench-webhook-secret"

// webhookRun deploys one application of one replica from a bare repository,
// then k times: commits a change to its service in a clone, pushes it,
// POSTs a generic webhook, and times until the swarm runs the new version.
// The application's interval is an hour, so only the webhook can start the
// pass.
func (b *bench) webhookRun(ctx context.Context, k int) (*webhookResult, error) {
	dir := filepath.Join(b.work, "webhook")
	app := b.id + "w"
	b.stacks = append(b.stacks, app)
	bare, clone := filepath.Join(dir, "origin.git"), filepath.Join(dir, "clone")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		return nil, err
	}
	if err := git(bare, "init", "-q", "--bare", "-b", "main"); err != nil {
		return nil, err
	}
	file := app + "/docker-compose.yml"
	if err := newRepo(clone, map[string]string{file: composeFile(1, 1, "v0")}); err != nil {
		return nil, err
	}
	if err := git(clone, "push", "-q", bare, "main"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(appsFile(bare, []string{app}, "1h")), 0o644); err != nil {
		return nil, err
	}
	c, err := b.startController(dir, "FLOTILLA_WEBHOOK_GENERIC_SECRET="+webhookSecret)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	api, err := client.New(client.WithHost("unix://" + b.o.daemon))
	if err != nil {
		return nil, err
	}
	defer api.Close()
	service := app + "_svc001"
	if err := waitFor(ctx, 60*time.Second, func() (bool, error) { return runsMarker(ctx, api, service, "v0") }); err != nil {
		return nil, fmt.Errorf("first deploy: %w", err)
	}

	res := &webhookResult{Commits: k}
	var mu sync.Mutex
	var updated time.Time
	b.px.setOnUpdate(func(t time.Time) {
		mu.Lock()
		if updated.IsZero() {
			updated = t
		}
		mu.Unlock()
	})
	defer b.px.setOnUpdate(nil)
	for i := 1; i <= k; i++ {
		marker := fmt.Sprintf("v%d", i)
		if err := commit(clone, map[string]string{file: composeFile(1, 1, marker)}, "change "+marker); err != nil {
			return nil, err
		}
		if err := git(clone, "push", "-q", bare, "main"); err != nil {
			return nil, err
		}
		pushed := time.Now()
		mu.Lock()
		updated = time.Time{}
		mu.Unlock()
		posted := time.Now()
		if err := postWebhook(c.addr, bare, b.id+marker); err != nil {
			return nil, err
		}
		var visible time.Time
		if err := waitFor(ctx, 30*time.Second, func() (bool, error) {
			s, err := api.ServiceInspect(ctx, service, client.ServiceInspectOptions{})
			if err != nil {
				return false, err
			}
			ok := slices.Contains(s.Service.Spec.TaskTemplate.ContainerSpec.Env, "MARKER="+marker)
			if ok {
				visible = time.Now()
			}
			return ok, nil
		}); err != nil {
			return nil, fmt.Errorf("commit %s: new spec: %w", marker, err)
		}
		if err := waitFor(ctx, 60*time.Second, func() (bool, error) { return runsMarker(ctx, api, service, marker) }); err != nil {
			return nil, fmt.Errorf("commit %s: new task: %w", marker, err)
		}
		running := time.Now()
		mu.Lock()
		up := updated
		mu.Unlock()
		if up.IsZero() {
			return nil, fmt.Errorf("commit %s: the proxy saw no service update", marker)
		}
		res.Controller = append(res.Controller, up.Sub(posted))
		res.Visible = append(res.Visible, visible.Sub(posted))
		res.Swarm = append(res.Swarm, running.Sub(up))
		res.Total = append(res.Total, running.Sub(pushed))
		fmt.Fprintf(os.Stderr, "webhook commit %s: controller %s, swarm %s\n", marker, up.Sub(posted).Round(time.Millisecond), running.Sub(up).Round(time.Millisecond))
	}
	res.PeakMB = procStatus(c.cmd.Process.Pid, "VmHWM")["VmHWM"] / 1024
	return res, nil
}

// postWebhook delivers a generic push of repo's main; id tells deliveries
// apart, since the controller refuses a replayed one.
func postWebhook(addr, repo, id string) error {
	body, _ := json.Marshal(map[string]string{"repository": repo, "ref": "refs/heads/main", "id": id})
	mac := hmac.New(sha256.New, []byte(webhookSecret))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/webhooks/generic", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Flotilla-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// runsMarker reports whether a task of service whose spec carries
// MARKER=marker is running.
func runsMarker(ctx context.Context, api *client.Client, service, marker string) (bool, error) {
	tasks, err := api.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", service).Add("desired-state", "running")})
	if err != nil {
		return false, err
	}
	for _, t := range tasks.Items {
		if t.Status.State == swarm.TaskStateRunning && t.Spec.ContainerSpec != nil && slices.Contains(t.Spec.ContainerSpec.Env, "MARKER="+marker) {
			return true, nil
		}
	}
	return false, nil
}

// waitFor polls cond every 5ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
