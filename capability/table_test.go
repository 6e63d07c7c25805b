package capability_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/capability"
	"github.com/flotilla-gitops/flotilla/charts"
	"github.com/flotilla-gitops/flotilla/charts/chartstest"
)

// notCapabilities are the package's exported interfaces that a backend does
// not implement for a feature of its own.
var notCapabilities = []string{"Wrapper"}

// ownAddition is the sentence that marks a capability as Flotilla's own
// rather than one of the founding specification's.
const ownAddition = "Flotilla's own addition"

// exportedInterfaces parses the package's Go files and returns each
// exported interface type with its doc comment.
func exportedInterfaces(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.InterfaceType); !ok || !ts.Name.IsExported() {
					continue
				}
				doc := ts.Doc
				if doc == nil {
					doc = gd.Doc
				}
				out[ts.Name.Name] = doc.Text()
			}
		}
	}
	return out
}

func names(ds []capability.Descriptor) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

// Every exported interface of the package is in the table, described
// completely, and the table holds nothing else.
func TestAll_coversEveryInterface(t *testing.T) {
	ifaces := exportedInterfaces(t)
	all := capability.All()
	seen := map[string]bool{}
	for _, d := range all {
		if seen[d.Name] {
			t.Errorf("%s is in the table twice", d.Name)
		}
		seen[d.Name] = true
		doc, ok := ifaces[d.Name]
		switch {
		case !ok:
			t.Errorf("%s is in the table but is not an exported interface of the package", d.Name)
		case d.Type == nil || d.Type.Kind() != reflect.Interface || d.Type.Name() != d.Name ||
			d.Type.PkgPath() != "github.com/flotilla-gitops/flotilla/capability":
			t.Errorf("%s: Type is %v, want the interface of that name", d.Name, d.Type)
		case d.Seed == strings.Contains(doc, ownAddition):
			t.Errorf("%s: Seed is %v, but its doc comment says %q: %v", d.Name, d.Seed, ownAddition, !d.Seed)
		}
		if d.Feature == "" {
			t.Errorf("%s: no Feature, so status cannot say what a backend without it loses", d.Name)
		}
		if d.Within != "" {
			if w, ok := capability.Lookup(d.Within); !ok || w.Within != "" || d.Within == d.Name {
				t.Errorf("%s: Within %q is not another top-level capability", d.Name, d.Within)
			}
		}
	}
	for name := range ifaces {
		if !seen[name] && !slices.Contains(notCapabilities, name) {
			t.Errorf("exported interface %s is not in the capability table (capability/table.go)", name)
		}
	}
}

type docRow struct {
	name, with, without string
	flotillas           bool
}

// docRows reads the capability table of docs/capabilities.md.
func docRows(t *testing.T) []docRow {
	t.Helper()
	f, err := os.Open("../docs/capabilities.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []docRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("docs row with %d cells, want 3: %s", len(cells), line)
		}
		first := strings.TrimSpace(cells[0])
		name, rest, _ := strings.Cut(strings.TrimPrefix(first, "`"), "`")
		rows = append(rows, docRow{
			name:      name,
			flotillas: strings.TrimSpace(rest) == "(Flotilla's)",
			with:      strings.TrimSpace(cells[1]),
			without:   strings.TrimSpace(cells[2]),
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// docs/capabilities.md has one row per capability, in the table's order,
// marks Flotilla's own, and quotes the words status shows without each.
func TestAll_matchesDocs(t *testing.T) {
	rows := docRows(t)
	all := capability.All()
	got := make([]string, 0, len(rows))
	for _, r := range rows {
		got = append(got, r.name)
	}
	if want := names(all); !slices.Equal(got, want) {
		t.Fatalf("docs/capabilities.md lists\n%v\nthe table (capability/table.go) has\n%v", got, want)
	}
	for i, d := range all {
		r := rows[i]
		if r.flotillas == d.Seed {
			t.Errorf("docs row %s: marked Flotilla's is %v, table says Seed %v", d.Name, r.flotillas, d.Seed)
		}
		if r.with == "" || r.without == "" {
			t.Errorf("docs row %s has an empty cell", d.Name)
		}
		if note := `"` + d.Feature + ` unavailable`; !strings.Contains(r.without, note) {
			t.Errorf("docs row %s: the without-it cell does not quote the status note %s: %s", d.Name, note, r.without)
		}
	}
}

// liveOnly claims LiveDrift and nothing else, behind a wrapper.
type liveOnly struct {
	*chartstest.MinimalBackend
	capability.LiveDrift
}

type wrapped struct{ *chartstest.MinimalBackend }

func (w wrapped) Unwrap() charts.Backend { return w.MinimalBackend }

func TestMissing(t *testing.T) {
	minimal := chartstest.NewMinimal()
	got := names(capability.Missing(minimal))
	for _, d := range capability.All() {
		reported := slices.Contains(got, d.Name)
		if reported == (d.Within != "") {
			t.Errorf("minimal backend: %s reported %v, Within %q", d.Name, reported, d.Within)
		}
	}
	live := names(capability.Missing(liveOnly{MinimalBackend: minimal}))
	for _, want := range []string{"NetworkNamer", "LiveServicesBatch", "StacksReader"} {
		if !slices.Contains(live, want) {
			t.Errorf("with LiveDrift, %s is not reported missing: %v", want, live)
		}
	}
	if slices.Contains(live, "LiveDrift") {
		t.Errorf("LiveDrift reported missing from a backend that has it")
	}
}

func TestDescriptor_In_followsUnwrap(t *testing.T) {
	d, ok := capability.Lookup("LiveDrift")
	if !ok {
		t.Fatal("no LiveDrift in the table")
	}
	inner := &liveOnly{MinimalBackend: chartstest.NewMinimal()}
	outer := struct {
		*chartstest.MinimalBackend
		capability.Wrapper
	}{inner.MinimalBackend, unwrapTo{inner}}
	if !d.In(inner) || !d.In(outer) {
		t.Fatal("LiveDrift not found through Unwrap")
	}
	if d.In(wrapped{chartstest.NewMinimal()}) {
		t.Fatal("LiveDrift found in a wrapper of a backend without it")
	}
}

type unwrapTo struct{ b charts.Backend }

func (u unwrapTo) Unwrap() charts.Backend { return u.b }

func TestDescriptor_Unavailable(t *testing.T) {
	d, _ := capability.Lookup("LiveDrift")
	if got := d.Unavailable().Error(); got != "live drift unavailable: backend lacks LiveDrift" {
		t.Fatalf("got %q", got)
	}
}
