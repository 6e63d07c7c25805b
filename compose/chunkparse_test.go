package compose

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// chunkCases are compose texts cut into pieces or refused: each must
// parse to what the whole text parses to, or fail the same way.
var chunkCases = map[string]string{
	"plain":             "version: \"3.8\"\nservices:\n  a:\n    image: x\n  b:\n    image: y\nnetworks:\n  n: {}\n",
	"comments":          "# head\n\nversion: \"3\"\n# between\nservices:\n  # first\n  a:\n    image: x\n# trailing\n  b:\n    image: y # end\n",
	"crlf":              "version: \"3\"\r\nservices:\r\n  a:\r\n    image: x\r\n  b:\r\n    image: y\r\n",
	"block scalar":      "services:\n  a:\n    command: |\n      one\n\n      two\n  b:\n    image: y\n",
	"plain multi-line":  "services:\n  a:\n    command: one\n      two\n  b:\n    image: y\n",
	"anchor across":     "x-c: &c\n  image: x\nservices:\n  a:\n    <<: *c\n  b:\n    image: y\n",
	"anchor within":     "services:\n  a: &a\n    image: x\n  b:\n    image: y\n",
	"alias to earlier":  "services:\n  a: &a\n    image: x\n  b: *a\n",
	"merge at services": "services:\n  <<: {a: {image: x}}\n  b:\n    image: y\n",
	"quoted across":     "services:\n  a:\n    command: \"x\n  b: y\"\n  c:\n    image: z\n",
	"flow across":       "services:\n  a:\n    command: [x,\n  b, y]\n  c:\n    image: z\n",
	"duplicate service": "services:\n  a:\n    image: x\n  a:\n    image: y\n",
	"duplicate top":     "version: \"3\"\nservices:\n  a:\n    image: x\nversion: \"3.8\"\n",
	"two services":      "services:\n  a:\n    image: x\nservices:\n  b:\n    image: y\n",
	"no services":       "version: \"3\"\nservices:\n",
	"inline services":   "services: {a: {image: x}, b: {image: y}}\n",
	"document marker":   "---\nservices:\n  a:\n    image: x\n",
	"tab":               "services:\n  a:\n\timage: x\n",
	"odd indentation":   "services:\n    a:\n      image: x\n  b:\n    image: y\n",
	"deeper later":      "services:\n  a:\n    image: x\n   b:\n    image: y\n",
	"scalar service":    "services:\n  a: x\n  b:\n    image: y\n",
	"sequence":          "services:\n  - a\n  - b\n",
	"numeric keys":      "services:\n  1:\n    image: x\n  \"1\":\n    image: y\n",
	"quoted key":        "services:\n  \"a b\":\n    image: x\n  'c':\n    image: y\n",
	"bad yaml":          "services:\n  a:\n    image: [x\n",
	"top scalar":        "x-a: foo\nbar\nservices:\n  a:\n    image: x\n",
	"empty":             "",
	"comment only":      "# nothing\n",
}

func checkChunked(t *testing.T, src string) {
	want, werr := parseYAML([]byte(src))
	got, _, gerr := parseChunked([]byte(src), true)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		t.Fatalf("whole: %v\nchunked: %v", werr, gerr)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("whole:   %#v\nchunked: %#v", want, got)
	}
}

// A compose file parsed piece by piece gives what parsing it whole gives,
// or the same error, however it is written: comments, CRLF, block and
// multi-line scalars, anchors within and across pieces, quoted and flow
// values spanning a cut, duplicate keys, odd indentation.
func TestChunkedParseEqualsAWholeParse(t *testing.T) {
	for name, src := range chunkCases {
		t.Run(name, func(t *testing.T) {
			checkChunked(t, src)
			checkChunked(t, src) // from the memo
		})
	}
	// The common shapes are cut, not parsed whole.
	for _, name := range []string{"plain", "comments", "crlf", "block scalar", "plain multi-line", "anchor within", "quoted key"} {
		if _, _, ok := chunked([]byte(chunkCases[name]), true); !ok {
			t.Errorf("%s: parsed whole, want piece by piece", name)
		}
	}
}

// The pieces a parse hands out are the caller's: changing one changes
// neither the memo nor the next parse of the same text.
func TestChunkedParseHandsOutCopies(t *testing.T) {
	src := []byte("services:\n  a:\n    image: x\n    environment: {A: b}\n  b:\n    image: y\n")
	first, _, err := parseChunked(src, true)
	if err != nil {
		t.Fatal(err)
	}
	first["services"].(map[string]any)["a"].(map[string]any)["environment"].(map[string]any)["A"] = "changed"
	again, _, err := parseChunked(src, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := again["services"].(map[string]any)["a"].(map[string]any)["environment"].(map[string]any)["A"]; got != "b" {
		t.Fatalf("second parse saw the first caller's change: %v", got)
	}
}

func FuzzChunkedParse(f *testing.F) {
	for _, src := range chunkCases {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if strings.Count(src, "\n") > 200 {
			return
		}
		checkChunked(t, src)
	})
}
