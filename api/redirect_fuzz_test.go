package api

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"unicode"
)

// FuzzSafeReturn: whatever the query holds, the redirect after login is
// either the console's home or the value itself, and then a path of this
// site as a browser would read it: one leading slash, no backslash, no
// control character, no scheme or host, raw or decoded.
func FuzzSafeReturn(f *testing.F) {
	for _, s := range []string{"/ui/", "/ui/#/app/shop", "//evil.example", "/\t/evil.example", "/%09/evil.example",
		`/\evil.example`, "/%2F/evil.example", "https://evil.example", "/%5c", "javascript:x", "/\u0085/x", "/a?b=c#d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := safeReturn(in)
		if got == "/ui/" {
			return
		}
		if got != in {
			t.Fatalf("safeReturn(%q) = %q: neither home nor the value", in, got)
		}
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "" || u.Host != "" {
			t.Fatalf("safeReturn(%q) kept a value with a scheme or host: %+v %v", in, u, err)
		}
		for _, p := range []string{got, u.Path} {
			if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsRune(p, '\\') ||
				strings.IndexFunc(p, unicode.IsControl) >= 0 {
				t.Fatalf("safeReturn(%q) kept %q, which a browser may read as another site", in, p)
			}
		}
	})
}

// FuzzLoopbackHost: a Host accepted without authentication is localhost or
// a loopback IP literal, never a name DNS resolves.
func FuzzLoopbackHost(f *testing.F) {
	for _, s := range []string{"localhost:8080", "127.0.0.1", "[::1]:80", "[::1]", "rebind.evil.example:8080",
		"127.0.0.1.nip.io", "localhost.", "127.1", "[fe80::1%25lo]:80", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !loopbackHost(host) {
			return
		}
		h := host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			h = hh
		}
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if ip := net.ParseIP(h); !strings.EqualFold(h, "localhost") && (ip == nil || !ip.IsLoopback()) {
			t.Fatalf("loopbackHost(%q) accepted %q, which is neither localhost nor a loopback literal", host, h)
		}
	})
}
