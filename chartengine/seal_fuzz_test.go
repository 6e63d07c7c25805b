package chartengine

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// FuzzSealScan holds the seal scan to its promise for any decrypted value
// and any text a template puts around its placeholder: whichever of the
// transforms a template has (as is, upper, lower, hex, base64 in every
// alphabet and padding), applied to the whole text, the scan finds the
// placeholder, so the output is refused.
func FuzzSealScan(f *testing.F) {
	for _, s := range []struct{ secret, prefix, suffix string }{
		{"hunter22", "", ""},
		{"p@ss: \"quoted\"", "password=", "\n"},
		{"-----BEGIN KEY-----\nabc\n-----END KEY-----", "a", "bc"},
		{"ünïcödé-secret", "\x00\xff", "é"},
	} {
		f.Add(s.secret, s.prefix, s.suffix)
	}
	f.Fuzz(func(t *testing.T, secret, prefix, suffix string) {
		if len(secret) < minRedacted {
			return
		}
		sl, err := newSeals([]byte("fuzz-seal-key"))
		if err != nil {
			t.Fatal(err)
		}
		vals := map[string]any{"a": map[string]any{"b": []any{secret}}}
		sl.seal(vals, []string{secret})
		tok, _ := vals["a"].(map[string]any)["b"].([]any)[0].(string)
		if !strings.HasPrefix(tok, sealMark) {
			t.Fatalf("the secret was not sealed: %q", tok)
		}
		text := prefix + tok + suffix
		for name, out := range map[string]string{
			"as is":     text,
			"upper":     strings.ToUpper(text),
			"lower":     strings.ToLower(text),
			"hex":       hex.EncodeToString([]byte(text)),
			"HEX":       fmt.Sprintf("%X", text),
			"b64":       base64.StdEncoding.EncodeToString([]byte(text)),
			"b64url":    base64.URLEncoding.EncodeToString([]byte(text)),
			"b64raw":    base64.RawStdEncoding.EncodeToString([]byte(text)),
			"b64rawurl": base64.RawURLEncoding.EncodeToString([]byte(text)),
		} {
			if got := sl.find(out); got != tok {
				t.Errorf("%s: scan found %q in %q, want %q", name, got, out, tok)
			}
		}
	})
}
