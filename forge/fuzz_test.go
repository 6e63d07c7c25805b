package forge

import (
	"strings"
	"testing"
)

// A forge's answer is untrusted: whatever it holds, decode does not panic,
// and what it returns is an open pull request with a number, a full commit
// SHA, and a fork unless its head is the repository asked about.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`[{"number":1,"state":"open","user":{"login":"ann"},"labels":[{"name":"preview"}],"head":{"sha":"0123456789abcdef0123456789abcdef01234567","repo":{"full_name":"shop/web"}},"created_at":"2026-12-01T10:00:00Z","updated_at":"2026-12-02T10:00:00Z"}]`))
	f.Add([]byte(`[{"number":2,"state":"open","head":{"sha":"0123456789ABCDEF0123456789abcdef01234567","repo":null}}]`))
	f.Add([]byte(`[{"number":3,"state":"closed","head":{"sha":"x"}}]`))
	f.Add([]byte(`[{"number":-1,"state":"open","head":{"sha":"0123456789abcdef0123456789abcdef01234567"}}]`))
	f.Add([]byte(`{"message":"Not Found"}`))
	f.Add([]byte(`[null, {}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		prs, err := decode(body, "shop/web")
		if err != nil {
			return
		}
		for _, p := range prs {
			if p.Number <= 0 || !isSHA(p.HeadSHA) || p.HeadSHA != strings.ToLower(p.HeadSHA) {
				t.Fatalf("decoded %+v", p)
			}
			if !p.Fork && !strings.EqualFold(p.HeadRepo, "shop/web") {
				t.Fatalf("not a fork: %+v", p)
			}
		}
	})
}
