package backend

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/capability"
)

// The guard block in capabilities.go names exactly the capabilities of the
// table the Backend implements, in the table's order: a capability added to
// the table and implemented here, or a method that happens to satisfy one,
// is claimed in that one place.
func TestBackendClaimsEveryCapabilityItImplements(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "capabilities.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var claimed []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if sel, ok := vs.Type.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "capability" {
				claimed = append(claimed, sel.Sel.Name)
			}
		}
		return false
	})
	self := reflect.TypeFor[*Backend]()
	var implemented []string
	for _, d := range capability.All() {
		if self.Implements(d.Type) {
			implemented = append(implemented, d.Name)
		}
	}
	if !slices.Equal(claimed, implemented) {
		t.Fatalf("capabilities.go claims\n%v\nthe Backend implements, in the table's order,\n%v", claimed, implemented)
	}
}
