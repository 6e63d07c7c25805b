package secretstore

import (
	"strings"
	"testing"

	"github.com/1Password/connect-sdk-go/onepassword"
)

// FuzzOnePasswordReference feeds the path and key a repository writes to
// the checks and the field lookup: no panic, a path with a quote or
// backslash never passes (it would reach the API's filter), and a field
// found is one the key names.
func FuzzOnePasswordReference(f *testing.F) {
	for _, s := range [][2]string{
		{"shop/db", "password"}, {"shop/db", "replica.password"}, {"a.b/c", "a.b.c"},
		{`shop" or title eq "x/db`, "."}, {"/db", ".."}, {"shop/", "replica."},
	} {
		f.Add(s[0], s[1])
	}
	it := &onepassword.Item{
		Sections: []*onepassword.ItemSection{{ID: "s1", Label: "replica"}, {ID: "s2", Label: "a.b"}},
		Fields: []*onepassword.ItemField{
			{ID: "f1", Label: "password", Value: "x"},
			{ID: "f2", Label: "password", Section: &onepassword.ItemSection{ID: "s1"}, Value: "y"},
			{ID: "f3", Label: "c", Section: &onepassword.ItemSection{ID: "s2"}, Value: "z"},
			{ID: "f4", Label: "b.c", Section: &onepassword.ItemSection{ID: "missing"}, Value: "w"},
			nil,
		},
	}
	f.Fuzz(func(t *testing.T, path, key string) {
		if err := checkOnePasswordPath(path); err == nil {
			if strings.ContainsAny(path, "\"\\") || !strings.Contains(path, "/") {
				t.Fatalf("path %q passed", path)
			}
		}
		fd, err := itemField(it, key)
		if err != nil {
			return
		}
		if fd.Label != key && !strings.HasSuffix(key, "."+fd.Label) {
			t.Fatalf("key %q found field %+v", key, fd)
		}
	})
}
