package secretstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/1Password/connect-sdk-go/connect"
	"github.com/1Password/connect-sdk-go/onepassword"
	"github.com/opentracing/opentracing-go"

	"github.com/flotilla-gitops/flotilla/application"
)

// A 1Password reference names "<vault>/<item>" as its path, each a title
// or a Connect ID, and a field of the item as its key: the field's label,
// or "<section label>.<field label>" when labels repeat across sections.
// The item's version says whether anything in it changed.

// onePasswordReader reads items from a 1Password Connect server with the
// official SDK (github.com/1Password/connect-sdk-go).
type onePasswordReader struct {
	store application.SecretStore
	host  string
	// inflight admits one request to the server at a time. The SDK takes
	// no context and uses http.DefaultClient, which has no timeout: a
	// request that outlives requestTimeout is abandoned, not cancelled,
	// and this bounds what a hung server can hold to one goroutine.
	inflight chan struct{}

	mu  sync.Mutex
	ids map[string]itemIDs // by reference path: the item the last read found
}

// itemIDs are the Connect IDs of an item and its vault.
type itemIDs struct{ vault, item string }

// connectUserAgent is what the controller tells the Connect server it is.
const connectUserAgent = "flotilla (connect-sdk-go/" + connect.SDKVersion + ")"

var quietTracer sync.Once

func newOnePasswordReader(s application.SecretStore) (reader, error) {
	o := s.OnePassword
	if o == nil {
		return nil, fmt.Errorf("store %q has no onePassword settings", s.Name)
	}
	// The SDK's constructor installs a Jaeger tracer as the process's
	// global one unless one is registered, and that tracer polls a
	// sampling server and sends spans over UDP to localhost. The
	// controller traces nothing: a no-op tracer keeps it quiet.
	quietTracer.Do(func() {
		if !opentracing.IsGlobalTracerRegistered() {
			opentracing.SetGlobalTracer(opentracing.NoopTracer{})
		}
	})
	return &onePasswordReader{
		store:    s,
		host:     strings.TrimRight(o.ConnectHost, "/"),
		inflight: make(chan struct{}, 1),
		ids:      map[string]itemIDs{},
	}, nil
}

func (r *onePasswordReader) read(ctx context.Context, path, key string) (Value, error) {
	var it *onepassword.Item
	err := r.call(ctx, func(c connect.Client) (err error) {
		it, err = findItem(c, path)
		return err
	})
	if err != nil {
		return Value{}, err
	}
	r.mu.Lock()
	r.ids[path] = itemIDs{vault: it.Vault.ID, item: it.ID}
	r.mu.Unlock()
	f, err := itemField(it, key)
	if err != nil {
		return Value{}, err
	}
	return Value{Data: []byte(f.Value), Version: it.Version, Entry: it.Vault.ID + "/" + it.ID}, nil
}

// version asks for the item the last read found, by its IDs: one request
// whether the reference names titles or IDs. A renamed item is followed
// until its version moves; then the next read looks the titles up again.
func (r *onePasswordReader) version(ctx context.Context, path string) (Value, bool, error) {
	r.mu.Lock()
	ids, ok := r.ids[path]
	r.mu.Unlock()
	if !ok {
		return Value{}, false, nil
	}
	var it *onepassword.Item
	err := r.call(ctx, func(c connect.Client) (err error) {
		it, err = c.GetItemByUUID(ids.item, ids.vault)
		return err
	})
	if errors.Is(err, ErrNoValue) {
		// Deleted or moved: the read looks it up again.
		r.mu.Lock()
		delete(r.ids, path)
		r.mu.Unlock()
		return Value{}, false, nil
	}
	if err != nil {
		return Value{}, false, err
	}
	return Value{Version: it.Version, Entry: it.Vault.ID + "/" + it.ID}, it.Version > 0, nil
}

// call runs one SDK operation with the token file's current content,
// bounded by ctx and requestTimeout.
func (r *onePasswordReader) call(ctx context.Context, op func(connect.Client) error) error {
	tok, err := readCredential(r.store.OnePassword.TokenFile, "onePassword.tokenFile")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	select {
	case r.inflight <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: an earlier request to the Connect server has not returned", ErrUnavailable)
	}
	c := connect.NewClientWithUserAgent(r.host, tok, connectUserAgent)
	done := make(chan error, 1)
	go func() {
		defer func() { <-r.inflight }()
		done <- op(c)
	}()
	select {
	case err := <-done:
		return connectError(err, tok)
	case <-ctx.Done():
		return fmt.Errorf("%w: the Connect server did not answer: %v", ErrUnavailable, ctx.Err())
	}
}

// connectIDPattern is the form of a Connect vault or item ID; the SDK
// takes a string of this form for an ID, anything else for a title.
var connectIDPattern = regexp.MustCompile(`^[a-z0-9]{26}$`)

// findItem finds the item at path. Titles are looked up with the API's
// title filter and then compared exactly; a title that more than one
// vault or item carries is refused rather than guessed.
func findItem(c connect.Client, path string) (*onepassword.Item, error) {
	vaultQ, itemQ, _ := strings.Cut(path, "/")
	vaultID := vaultQ
	if !connectIDPattern.MatchString(vaultQ) {
		vs, err := c.GetVaultsByTitle(vaultQ)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, v := range vs {
			if v.Name == vaultQ {
				ids = append(ids, v.ID)
			}
		}
		if len(ids) != 1 {
			return nil, fmt.Errorf("%w: %d vaults the token can read are titled %q", ErrNoValue, len(ids), vaultQ)
		}
		vaultID = ids[0]
	}
	if connectIDPattern.MatchString(itemQ) {
		return c.GetItemByUUID(itemQ, vaultID)
	}
	items, err := c.GetItemsByTitle(itemQ, vaultID)
	if err != nil {
		return nil, err
	}
	var found []*onepassword.Item
	for i := range items {
		if items[i].Title == itemQ {
			found = append(found, &items[i])
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%w: %d items of the vault are titled %q", ErrNoValue, len(found), itemQ)
	}
	return found[0], nil
}

// itemField finds the field key names: by label (when sections repeat it,
// the one outside any section), else as "<section label>.<field label>"
// (section labels may hold dots too).
func itemField(it *onepassword.Item, key string) (*onepassword.ItemField, error) {
	var hits, unsectioned []*onepassword.ItemField
	for _, f := range it.Fields {
		if f != nil && f.Label == key {
			hits = append(hits, f)
			if f.Section == nil || f.Section.ID == "" {
				unsectioned = append(unsectioned, f)
			}
		}
	}
	if len(hits) > 1 && len(unsectioned) == 1 {
		return unsectioned[0], nil
	}
	if len(hits) == 0 {
		sections := map[string]string{}
		for _, s := range it.Sections {
			if s != nil {
				sections[s.ID] = s.Label
			}
		}
		for i := strings.IndexByte(key, '.'); i >= 0; {
			sec, label := key[:i], key[i+1:]
			for _, f := range it.Fields {
				if f == nil || f.Section == nil || f.Label != label {
					continue
				}
				sl := f.Section.Label
				if sl == "" {
					sl = sections[f.Section.ID]
				}
				if sl == sec {
					hits = append(hits, f)
				}
			}
			j := strings.IndexByte(key[i+1:], '.')
			if j < 0 {
				break
			}
			i += j + 1
		}
	}
	switch len(hits) {
	case 0:
		return nil, fmt.Errorf("%w: the item has no field labelled %q", ErrNoValue, key)
	case 1:
		return hits[0], nil
	default:
		return nil, fmt.Errorf("%w: %d fields of the item are labelled %q; name one as <section>.<field>", ErrNoValue, len(hits), key)
	}
}

// checkOnePasswordPath refuses, before any request, a path that is not
// "<vault>/<item>", or that holds a character the SDK would pass into the
// API's filter expression unescaped (a quote or backslash could widen
// the filter to another vault or item than the path names).
func checkOnePasswordPath(p string) error {
	v, it, ok := strings.Cut(p, "/")
	if !ok || v == "" || it == "" {
		return fmt.Errorf("%w: a 1Password path is <vault>/<item>", ErrNoValue)
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r == '"' || r == '\\' || r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("%w: a vault or item title with a quote, backslash or control character must be named by its ID", ErrNoValue)
	}
	return nil
}

// connectError classifies an SDK error: a 404 is a missing value, any
// other refusal or failure a store the controller cannot use right now.
// The token is cut out of whatever text the error carries.
func connectError(err error, token string) error {
	if err == nil || errors.Is(err, ErrNoValue) || errors.Is(err, ErrUnavailable) {
		return err
	}
	var oe *onepassword.Error
	if errors.As(err, &oe) {
		se := &statusError{code: oe.StatusCode, method: http.MethodGet, msg: redact(oe.Message, token)}
		if se.msg == "" {
			se.msg = "no message"
		}
		return se
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, redact(err.Error(), token))
}

func redact(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "[token]")
}
