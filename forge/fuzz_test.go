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

// A listing of comments is untrusted too: whatever it holds, the comment
// picked to be edited is one the token's user wrote with the marker, with
// an id, never a system note, and never one picked before.
func FuzzPickComment(f *testing.F) {
	m := PlanMarker("web")
	f.Add([]byte(`[{"id":1,"body":"` + m + `\nplan","user":{"login":"bot"}}]`))
	f.Add([]byte(`[{"id":1,"body":"` + m + `","user":{"login":"eve"}},{"id":2,"body":"` + m + `","author":{"username":"BOT"}}]`))
	f.Add([]byte(`[{"id":3,"body":"` + m + `","system":true,"author":{"username":"bot"}},{"id":-4,"body":"` + m + `","user":{"login":"bot"}}]`))
	f.Add([]byte(`[null,{},{"id":5,"user":null,"author":null}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		cs, err := decodeComments(body)
		if err != nil {
			return
		}
		seen := map[int64]bool{}
		got, _ := pickComment(cs, seen, m, "bot")
		if got == nil {
			return
		}
		if got.ID <= 0 || got.System || !strings.EqualFold(got.author(), "bot") || !strings.HasPrefix(got.Body, m) {
			t.Fatalf("picked %+v", got)
		}
		if again, _ := pickComment([]comment{*got}, seen, m, "bot"); again != nil {
			t.Fatalf("picked %d twice", got.ID)
		}
	})
}
