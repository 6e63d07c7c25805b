// Package onepasswordtest is a hand-written stand-in for the part of the
// 1Password Connect REST API that the controller's 1Password store uses,
// serving from memory, for tests.
//
// The Connect server is closed source and ships only as a container image
// that cannot be pulled here, so the store cannot be tested against it.
// Nothing here was recorded from a real server: it answers the paths
// connect-sdk-go calls (vaults and items filtered by title, a vault and an
// item by ID) with bodies encoded from the SDK's own onepassword types, so
// its JSON has the shape the SDK parses; it checks the bearer token (401
// otherwise, as Connect answers) and counts requests; and the test edits
// items, each edit moving the item's version as 1Password does.
package onepasswordtest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/1Password/connect-sdk-go/onepassword"
)

// Server is a running stand-in Connect server on loopback.
type Server struct {
	// URL is its address, http://127.0.0.1:<port>, the store's
	// connectHost.
	URL string

	mu       sync.Mutex
	token    string
	vaults   []onepassword.Vault
	items    []*onepassword.Item
	requests []string
}

// Start serves on a free loopback port until the test ends, accepting
// token as the only valid access token.
func Start(t testing.TB, token string) *Server {
	t.Helper()
	s := &Server{token: token}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/vaults", s.listVaults)
	mux.HandleFunc("GET /v1/vaults/{vault}", s.getVault)
	mux.HandleFunc("GET /v1/vaults/{vault}/items", s.listItems)
	mux.HandleFunc("GET /v1/vaults/{vault}/items/{item}", s.getItem)
	h := httptest.NewServer(s.authorized(mux))
	t.Cleanup(h.Close)
	s.URL = h.URL
	return s
}

// Field is one field of an item as a test writes it: its section's label
// ("" for none), its label and its value.
type Field struct {
	Section, Label, Value string
}

// AddVault adds a vault and returns its ID.
func (s *Server) AddVault(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Second)
	v := onepassword.Vault{ID: newID(), Name: name, Type: onepassword.UserCreatedVault, AttrVersion: 1, ContentVersion: 1, CreatedAt: now, UpdatedAt: now}
	s.vaults = append(s.vaults, v)
	return v.ID
}

// SetItem creates the item titled title in the vault, at version 1, or
// replaces the fields of the one there and moves its version on by one,
// as an edit in 1Password does. It returns the item's ID.
func (s *Server) SetItem(vaultID, title string, fields ...Field) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Second)
	var it *onepassword.Item
	for _, i := range s.items {
		if i.Vault.ID == vaultID && i.Title == title {
			it = i
		}
	}
	if it == nil {
		it = &onepassword.Item{ID: newID(), Title: title, Vault: onepassword.ItemVault{ID: vaultID}, Category: onepassword.Login, CreatedAt: now}
		s.items = append(s.items, it)
	}
	it.Version++
	it.UpdatedAt = now
	it.LastEditedBy = "TESTUSER0000000000000000AA"
	it.Sections, it.Fields = nil, nil
	sections := map[string]*onepassword.ItemSection{}
	for i, f := range fields {
		field := &onepassword.ItemField{ID: fmt.Sprintf("field%02d", i), Type: onepassword.FieldTypeConcealed, Label: f.Label, Value: f.Value}
		if f.Section != "" {
			sec := sections[f.Section]
			if sec == nil {
				sec = &onepassword.ItemSection{ID: fmt.Sprintf("section%02d", len(sections)), Label: f.Section}
				sections[f.Section] = sec
				it.Sections = append(it.Sections, sec)
			}
			field.Section = &onepassword.ItemSection{ID: sec.ID}
		}
		it.Fields = append(it.Fields, field)
	}
	return it.ID
}

// DeleteItem removes an item.
func (s *Server) DeleteItem(itemID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = slices.DeleteFunc(s.items, func(i *onepassword.Item) bool { return i.ID == itemID })
}

// SetToken makes token the only valid one: the old one is refused from
// now on, as a revoked Connect token is.
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// Requests lists the requests served so far ("GET /v1/...?..."),
// refused ones included.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// TokenFile writes token to a 0600 file in dir and returns its path.
func TokenFile(t testing.TB, dir, token string) string {
	t.Helper()
	f := filepath.Join(dir, "op-token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// authorized counts every request and refuses one without the token, with
// the status and body Connect gives.
func (s *Server) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
		ok := s.token != "" && r.Header.Get("Authorization") == "Bearer "+s.token
		s.mu.Unlock()
		if !ok {
			fail(w, http.StatusUnauthorized, "Invalid token signature")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// titleFilter is the one SCIM filter the SDK sends (Connect documents
// "name eq" for vaults too).
var titleFilter = regexp.MustCompile(`^(title|name) eq "([^"]*)"$`)

// filterTitle returns the title the request filters on; ok false for a
// filter this server does not know, which it refuses.
func filterTitle(w http.ResponseWriter, r *http.Request) (title string, filtered, ok bool) {
	f := r.URL.Query().Get("filter")
	if f == "" {
		return "", false, true
	}
	m := titleFilter.FindStringSubmatch(f)
	if m == nil {
		fail(w, http.StatusBadRequest, "Invalid filter")
		return "", false, false
	}
	return m[2], true, true
}

func (s *Server) listVaults(w http.ResponseWriter, r *http.Request) {
	title, filtered, ok := filterTitle(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	out := []onepassword.Vault{}
	for _, v := range s.vaults {
		if !filtered || v.Name == title {
			out = append(out, v)
		}
	}
	s.mu.Unlock()
	answer(w, out)
}

func (s *Server) getVault(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.vault(r.PathValue("vault")); v != nil {
		answer(w, v)
		return
	}
	fail(w, http.StatusNotFound, "Vault not found")
}

func (s *Server) listItems(w http.ResponseWriter, r *http.Request) {
	title, filtered, ok := filterTitle(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vid := r.PathValue("vault")
	if s.vault(vid) == nil {
		fail(w, http.StatusNotFound, "Vault not found")
		return
	}
	// A list holds item summaries: no sections, fields or files.
	out := []onepassword.Item{}
	for _, it := range s.items {
		if it.Vault.ID == vid && (!filtered || it.Title == title) {
			sum := *it
			sum.Sections, sum.Fields, sum.Files = nil, nil, nil
			out = append(out, sum)
		}
	}
	answer(w, out)
}

func (s *Server) getItem(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vid, iid := r.PathValue("vault"), r.PathValue("item")
	if s.vault(vid) == nil {
		fail(w, http.StatusNotFound, "Vault not found")
		return
	}
	for _, it := range s.items {
		if it.Vault.ID == vid && it.ID == iid {
			answer(w, it)
			return
		}
	}
	fail(w, http.StatusNotFound, "Item not found")
}

func (s *Server) vault(id string) *onepassword.Vault {
	for i := range s.vaults {
		if s.vaults[i].ID == id {
			return &s.vaults[i]
		}
	}
	return nil
}

func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("1Password-Connect-Version", "1.7.3")
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers as Connect does: {"status": code, "message": text}.
func fail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(onepassword.Error{StatusCode: code, Message: msg})
}

// newID makes a Connect-style ID: 26 lowercase letters and digits.
func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 26)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
