package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// A listing of configs always carries every config's data: the daemon has
// no way to leave it out, and the client decodes all of it (base64 and
// all) into memory. A caller that needs only labels, such as ReleaseOwners
// over every release record of a swarm, reads the answer itself through
// withListBody: the transport hands the successful answer's body to the
// caller's decoder and gives the client an empty list in its place. The
// request is the client's own (version negotiation, headers, counting and
// deadline included); only the decoding differs.
type listBodyKey struct{}

// withListBody returns a context under which the answer to a successful
// listing is decoded by decode instead of the client.
func withListBody(ctx context.Context, decode func(io.Reader) error) context.Context {
	return context.WithValue(ctx, listBodyKey{}, decode)
}

// takeListBody decodes resp's body with the decoder req's context carries,
// if any, and leaves an empty JSON list in its place.
func takeListBody(req *http.Request, resp *http.Response) (*http.Response, error) {
	decode, ok := req.Context().Value(listBodyKey{}).(func(io.Reader) error)
	if !ok || resp.StatusCode != http.StatusOK || req.Method != http.MethodGet {
		return resp, nil
	}
	err := decode(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read the answer to %s: %w", operation(req.Method, req.URL.Path), err)
	}
	resp.Body = io.NopCloser(strings.NewReader("[]"))
	resp.ContentLength = 2
	return resp, nil
}

// eachListed decodes a JSON list from r one element at a time, so the
// decoder holds one element's text rather than the whole answer's, and
// hands each to fn.
func eachListed[T any](r io.Reader, fn func(T)) error {
	dec := json.NewDecoder(r)
	if _, err := dec.Token(); err != nil { // [
		return err
	}
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return err
		}
		fn(v)
	}
	_, err := dec.Token() // ]
	return err
}

// listedNetwork is one network of a listing. The daemon lists the node's own
// copy of a network with its Containers, and the manager's without; the
// client's network.Summary no longer decodes that field, and staleOnNode
// needs to know whether it was sent, so network listings are decoded here.
type listedNetwork struct {
	network.Summary
	Containers map[string]json.RawMessage `json:"Containers"`
}

// listNetworks lists the networks f matches, decoding each entry as a
// listedNetwork (see withListBody).
func (b *Backend) listNetworks(ctx context.Context, f client.Filters) ([]listedNetwork, error) {
	var out []listedNetwork
	decode := func(r io.Reader) error {
		return eachListed(r, func(n listedNetwork) { out = append(out, n) })
	}
	list, err := b.api.NetworkList(withListBody(ctx, decode), client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, err
	}
	for _, n := range list.Items { // empty unless the answer reached the client undecoded
		out = append(out, listedNetwork{Summary: n})
	}
	return out, nil
}

// listedService is one service of a listing. Clients before API 1.29 wrote
// a service's network attachments to ServiceSpec.Networks; a daemon before
// API 1.44 still returns them there until the service is next updated, and
// a current one moves them to TaskTemplate.Networks on read. The moby api
// types no longer have the old field, so decoding moves them as a current
// daemon does: without it such a service would read as attached to nothing.
type listedService struct {
	swarm.Service
}

func (s *listedService) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &s.Service); err != nil {
		return err
	}
	if len(s.Spec.TaskTemplate.Networks) > 0 || !bytes.Contains(b, []byte(`"Networks"`)) {
		return nil
	}
	var old struct {
		Spec struct {
			Networks []swarm.NetworkAttachmentConfig
		}
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	s.Spec.TaskTemplate.Networks = old.Spec.Networks
	return nil
}
