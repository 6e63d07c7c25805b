package compose

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flotilla-gitops/flotilla/fault"
)

// fragileStrings are values that stress a YAML round trip: the first four
// yaml.v3's own encoder does not read back as written (a leading newline,
// a lone newline, a tab at the start of a line), the rest it quotes or
// keeps by itself (carriage returns, surrounding or only spaces, trailing
// newlines).
var fragileStrings = []string{
	"\nset -e\necho hi\n",
	"\n\nx",
	"\n",
	"\t\tindented\n",
	"line1\r\nline2\r\n",
	" lead and trail ",
	"   ",
	"tail\n\n\n",
	"plain",
	"a: b # not a comment",
	" #\n",
	" x\n",
	"  a\nb\n",
}

// keptBytes renders a project that carries s in a command argument, an
// environment value, a service label and a config file, converts the
// manifest, and reports what reached each of them. An error is a render
// that refused the project.
func keptBytes(t *testing.T, s string) (map[string]string, error) {
	t.Helper()
	// JSON text is YAML flow text, and its escapes mean the same in a
	// YAML double-quoted scalar; "$$" is compose's escape for "$".
	q, err := json.Marshal(strings.ReplaceAll(s, "$", "$$"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	file := `services:
  web:
    image: flotilla-test/app:1
    command: ["serve", ` + string(q) + `]
    environment:
      V: ` + string(q) + `
    deploy:
      labels:
        v: ` + string(q) + `
    configs: [conf]
configs:
  conf:
    file: ./conf.txt
`
	for name, data := range map[string]string{"compose.yaml": file, "conf.txt": s} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Render("bytes", Dir{Root: root})
	if err != nil {
		return nil, err
	}
	st, err := Convert(context.Background(), r.Manifest, "bytes", nil)
	if err != nil {
		t.Fatalf("manifest does not convert: %v\n%s", err, r.Manifest)
	}
	spec := st.Services["bytes_web"]
	cs := spec.TaskTemplate.ContainerSpec
	got := map[string]string{"label": spec.Labels["v"]}
	if len(cs.Args) == 2 {
		got["command"] = cs.Args[1]
	}
	for _, e := range cs.Env {
		if v, ok := strings.CutPrefix(e, "V="); ok {
			got["environment"] = v
		}
	}
	for _, c := range st.Configs {
		got["config"] = string(c.Data)
	}
	return got, nil
}

// What the repository declares is what reaches the daemon, byte for byte,
// through the stored manifest: a command block that begins with a newline
// used to lose it, and drift, comparing against the same altered text,
// could never see it.
func TestManifestKeepsEveryByteOfStrings(t *testing.T) {
	for _, s := range fragileStrings {
		got, err := keptBytes(t, s)
		if err != nil {
			t.Fatalf("%q: render refused: %v", s, err)
		}
		for _, field := range []string{"command", "environment", "label", "config"} {
			if got[field] != s {
				t.Errorf("%q: %s reached the daemon as %q", s, field, got[field])
			}
		}
	}
}

// A command argument whose first line begins with a space was stored as a
// literal block with an indentation indicator, and reading the manifest
// wrote the compose section out again at another indent, where yaml.v3
// reads the indicator from a different column: " #\n" (found by
// FuzzManifestKeepsBytes) reached the daemon as "", " x\n" failed to
// load. A manifest stored that way before the fix is read right too.
func TestManifestKeepsLeadingSpaceBlockInSequence(t *testing.T) {
	for _, s := range []string{" #\n", " x\n", "  a\nb\n", " #\n#\n"} {
		got, err := keptBytes(t, s)
		if err != nil {
			t.Fatalf("%q: render refused: %v", s, err)
		}
		if got["command"] != s {
			t.Errorf("%q: command argument reached the daemon as %q", s, got["command"])
		}
	}
	stored := "kind: flotilla.compose/v1\nstack: bytes\ncompose:\n  version: \"3.13\"\n  services:\n    web:\n      command:\n        - serve\n        - |2\n           #\n      image: x\n"
	st, err := Convert(context.Background(), stored, "bytes", nil)
	if err != nil {
		t.Fatalf("stored manifest does not convert: %v", err)
	}
	if args := st.Services["bytes_web"].TaskTemplate.ContainerSpec.Args; len(args) != 2 || args[1] != " #\n" {
		t.Errorf("stored manifest's command is %q, want [serve \" #\\n\"]", args)
	}
}

// A manifest whose strings all round-trip is written as before: changing
// the encoding of unaffected manifests would make every stored release
// look changed.
func TestQuoteFragileStringsLeavesOtherStringsAlone(t *testing.T) {
	for _, s := range []string{"plain", "two\nlines\n", "a: b", "true", "123", ""} {
		if !roundTrips(s) {
			t.Errorf("%q is reported fragile", s)
		}
	}
	for _, s := range fragileStrings[:4] {
		if roundTrips(s) {
			t.Errorf("%q is reported safe, but yaml.v3 alone does not keep it", s)
		}
	}
}

// FuzzManifestKeepsBytes checks that render, manifest and convert are the
// identity on every string that reaches the daemon: whatever text a
// repository puts in a command, an environment value, a label or a config
// file either arrives unchanged or is refused with a *fault.Error.
func FuzzManifestKeepsBytes(f *testing.F) {
	for _, s := range fragileStrings {
		f.Add(s)
	}
	f.Add("é\u2028x")
	f.Add("#!/bin/sh\n\texit 0\n")
	f.Add("a\x00b") // refused: no field can carry a NUL to a container
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			// JSON quoting would replace the bad bytes, so the file would
			// not say s; a file that is not UTF-8 is refused (see
			// TestTextTheDaemonCannotBeGivenIsRefusedWhereItIs).
			return
		}
		got, err := keptBytes(t, s)
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error is %T, not *fault.Error: %v", err, err)
			}
			return
		}
		var lost []string
		for _, field := range []string{"command", "environment", "label", "config"} {
			if got[field] != s {
				lost = append(lost, field)
			}
		}
		if len(lost) > 0 {
			slices.Sort(lost)
			t.Fatalf("%q changed on the way to the daemon in %v: %q", s, lost, got)
		}
	})
}

// Text the YAML of a compose file cannot carry to the daemon byte for byte
// is refused before anything is deployed, naming the file, the line and,
// where there is one, the field: a file that is not UTF-8 (the parser said
// only "invalid leading UTF-8 octet") and a NUL written as an escape,
// which the daemon took and the container then failed on at its start.
func TestTextTheDaemonCannotBeGivenIsRefusedWhereItIs(t *testing.T) {
	for _, c := range []struct {
		body  string
		want  []string
		field string
	}{
		{"services:\n  web:\n    image: x\n    command: [\"ok\", \"a\xffb\"]\n", []string{"compose.yaml:4", "byte 0xff at column 23", "not UTF-8"}, ""},
		{"services:\n  web:\n    image: x\n    environment:\n      A: \"é\xc3\"\n", []string{"compose.yaml:5", "byte 0xc3 at column 12"}, ""},
		{"services:\n  web:\n    image: x\n    command: [\"ok\", \"a\\x00b\"]\n", []string{"compose.yaml:4", "NUL"}, "services.web.command.1"},
		{"services:\n  web:\n    image: x\n    labels:\n      \"k\\0\": v\n", []string{"compose.yaml:", "NUL"}, `services.web.labels."k\x00"`},
	} {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "compose.yaml"), []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Render("bytes", Dir{Root: root})
		var fe *fault.Error
		if !errors.As(err, &fe) {
			t.Fatalf("%q: got %v, want a *fault.Error", c.body, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not say %q", c.body, err, w)
			}
		}
		if fe.Field != c.field {
			t.Errorf("%q: field %q, want %q", c.body, fe.Field, c.field)
		}
	}
}
