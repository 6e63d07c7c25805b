package imagewrite

import (
	"errors"
	"strings"
	"testing"
)

func rewrite(t *testing.T, in string, path []string, to string) string {
	t.Helper()
	f, err := Find([]byte(in), path)
	if err != nil {
		t.Fatalf("Find(%v): %v", path, err)
	}
	out, err := Apply([]byte(in), []Change{{Field: f, New: to}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return string(out)
}

func TestApply_preservesEverythingButTheValue(t *testing.T) {
	web := []string{"services", "web", "image"}
	tests := []struct {
		name     string
		in, want string
		path     []string
		to       string
	}{
		{
			name: "plain value, comments and odd spacing kept",
			in:   "# top comment\nservices:\n  web:   # the site\n    image:    reg.test/app:1.0.0   # pinned by flotilla\n    ports: [ \"80:80\" ]\n  db:\n    image: reg.test/app:1.0.0\n",
			want: "# top comment\nservices:\n  web:   # the site\n    image:    reg.test/app:1.1.0   # pinned by flotilla\n    ports: [ \"80:80\" ]\n  db:\n    image: reg.test/app:1.0.0\n",
			path: web, to: "reg.test/app:1.1.0",
		},
		{
			name: "double quotes kept",
			in:   "services:\n  web:\n    image: \"reg.test/app:1.0.0\"\n",
			want: "services:\n  web:\n    image: \"reg.test/app:2.0.0\"\n",
			path: web, to: "reg.test/app:2.0.0",
		},
		{
			name: "single quotes kept",
			in:   "services:\n  web:\n    image: 'reg.test/app:1.0.0' #c\n",
			want: "services:\n  web:\n    image: 'reg.test/app:2.0.0' #c\n",
			path: web, to: "reg.test/app:2.0.0",
		},
		{
			name: "CRLF line endings kept",
			in:   "services:\r\n  web:\r\n    image: reg.test/app:1.0.0\r\n    command: [\"x\"]\r\n",
			want: "services:\r\n  web:\r\n    image: reg.test/app:1.0.1\r\n    command: [\"x\"]\r\n",
			path: web, to: "reg.test/app:1.0.1",
		},
		{
			name: "anchors and merge keys elsewhere untouched",
			in:   "x-common: &common\n  restart: always # shared\nservices:\n  web:\n    <<: *common\n    image: &img reg.test/app:1.0.0\n",
			want: "x-common: &common\n  restart: always # shared\nservices:\n  web:\n    <<: *common\n    image: &img reg.test/app:1.0.1\n",
			path: web, to: "reg.test/app:1.0.1",
		},
		{
			name: "flow mapping",
			in:   "services: {web: {image: reg.test/app:1, init: true}}\n",
			want: "services: {web: {image: reg.test/app:2, init: true}}\n",
			path: web, to: "reg.test/app:2",
		},
		{
			name: "non-ASCII before the value on the line",
			in:   "services:\n  web: {x-note: \"héllo wörld\", image: reg.test/app:1}\n",
			want: "services:\n  web: {x-note: \"héllo wörld\", image: reg.test/app:2}\n",
			path: web, to: "reg.test/app:2",
		},
		{
			name: "a plain tag that would read as a number is quoted",
			in:   "image:\n  repository: reg.test/app\n  tag: abc # build\n",
			want: "image:\n  repository: reg.test/app\n  tag: \"1.10\" # build\n",
			path: []string{"image", "tag"}, to: "1.10",
		},
		{
			name: "no trailing newline",
			in:   "image:\n  tag: \"1.0\"",
			want: "image:\n  tag: \"1.1\"",
			path: []string{"image", "tag"}, to: "1.1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rewrite(t, tt.in, tt.path, tt.to); got != tt.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestApply_twoChangesInOneFile(t *testing.T) {
	in := "services:\n  a:\n    image: r/app:1 # a\n  b:\n    image: \"r/app:1\"\n"
	fa, err := Find([]byte(in), []string{"services", "a", "image"})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := Find([]byte(in), []string{"services", "b", "image"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Apply([]byte(in), []Change{{fa, "r/app:10"}, {fb, "r/app:10"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "services:\n  a:\n    image: r/app:10 # a\n  b:\n    image: \"r/app:10\"\n"; string(out) != want {
		t.Fatalf("got %q", out)
	}
}

func TestFind_refuses(t *testing.T) {
	web := []string{"services", "web", "image"}
	for name, tt := range map[string]struct {
		in   string
		want error
	}{
		"alias":            {"x-img: &img r/app:1\nservices:\n  web:\n    image: *img\n", ErrNotScalar},
		"aliased anchor":   {"services:\n  web:\n    image: &img r/app:1\n  db:\n    image: *img\n", ErrNotScalar},
		"block scalar":     {"services:\n  web:\n    image: |\n      r/app:1\n", ErrNotScalar},
		"multi-line plain": {"services:\n  web:\n    image: r/app\n      :1\n", ErrNotScalar},
		"mapping":          {"services:\n  web:\n    image: {a: 1}\n", ErrNotScalar},
		"missing key":      {"services:\n  web:\n    command: x\n", ErrNoField},
		"through a merge":  {"x: &b\n  image: r/app:1\nservices:\n  web:\n    <<: *b\n", ErrNoField},
		"not a mapping":    {"services: [web]\n", ErrNoField},
		"empty":            {"", ErrNoField},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Find([]byte(tt.in), web)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Find = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestApply_refusesValuesOutsideTheImageGrammar(t *testing.T) {
	in := "image:\n  tag: a\n"
	f, err := Find([]byte(in), []string{"image", "tag"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"", "a b", "a\n", "a#b", "{x}", `a"b`} {
		if _, err := Apply([]byte(in), []Change{{f, v}}); err == nil || !strings.Contains(err.Error(), "not an image reference") {
			t.Errorf("Apply(%q) = %v", v, err)
		}
	}
}

func FuzzFind(f *testing.F) {
	f.Add("services:\n  web:\n    image: r/app:1\n", "r/app:2")
	f.Add("services:\r\n  web: {image: 'r/app:1'}\r\n", "r/app:3")
	f.Add("services:\n  web:\n    image: &a \"r/app:1\" # c\n", "x")
	f.Fuzz(func(t *testing.T, in, to string) {
		fd, err := Find([]byte(in), []string{"services", "web", "image"})
		if err != nil {
			return
		}
		out, err := Apply([]byte(in), []Change{{fd, to}})
		if err != nil {
			return
		}
		// Only the scalar's bytes changed.
		if !strings.HasPrefix(string(out), in[:fd.start]) || !strings.HasSuffix(string(out), in[fd.end:]) {
			t.Fatalf("bytes outside the scalar changed: %q -> %q", in, out)
		}
	})
}
