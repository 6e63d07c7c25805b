package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/flotilla-gitops/flotilla/api"
)

// Logs reads an application's task logs and hands each line to fn, until
// the logs end, or with o.Follow until ctx ends (which is not an error). A
// stream the server ended with an error line returns that error.
func (c *Client) Logs(ctx context.Context, name string, o api.LogOptions, fn func(api.LogLine) error) error {
	q := url.Values{}
	if o.Service != "" {
		q.Set("service", o.Service)
	}
	if o.Task != "" {
		q.Set("task", o.Task)
	}
	q.Set("tail", strconv.Itoa(o.Tail))
	q.Set("follow", strconv.FormatBool(o.Follow))
	q.Set("timestamps", strconv.FormatBool(o.Timestamps))
	path := appPath(name, "logs")
	req, err := c.newRequest(ctx, "GET", path, q, nil)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var l api.LogLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("GET %s: decode line: %w", path, err)
		}
		if l.Error != "" {
			return fmt.Errorf("logs of %s: %s", name, l.Error)
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && !(o.Follow && errors.Is(ctx.Err(), context.Canceled)) {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
