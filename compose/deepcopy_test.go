package compose

import (
	"reflect"
	"testing"
	"time"
)

type copyNode struct {
	Name     string
	Next     *copyNode
	Tags     []string
	Empty    []string
	Nil      []string
	Attrs    map[string]*string
	Any      any
	When     time.Time
	Children []copyNode
	hidden   int
}

// A deep copy shares nothing a change could reach through, keeps nil apart
// from empty, and follows a type that refers to itself.
func TestDeepCopy_sharesNothingAndKeepsNilApartFromEmpty(t *testing.T) {
	v := "v"
	src := &copyNode{
		Name: "a", Next: &copyNode{Name: "b", Tags: []string{"x"}},
		Tags: []string{"t"}, Empty: []string{}, Attrs: map[string]*string{"k": &v},
		Any: []int{1}, When: time.Unix(1, 0).UTC(), Children: []copyNode{{Name: "c", Tags: []string{"y"}}}, hidden: 7,
	}
	got := deepCopy(src)
	if !reflect.DeepEqual(got, src) {
		t.Fatalf("copy differs: %+v", got)
	}
	if got.Empty == nil || got.Nil != nil {
		t.Errorf("nil and empty not kept apart: empty %v, nil %v", got.Empty, got.Nil)
	}
	got.Next.Tags[0] = "changed"
	*got.Attrs["k"] = "changed"
	got.Any.([]int)[0] = 2
	got.Children[0].Tags[0] = "changed"
	got.Tags[0] = "changed"
	if src.Next.Tags[0] != "x" || v != "v" || src.Any.([]int)[0] != 1 || src.Children[0].Tags[0] != "y" || src.Tags[0] != "t" {
		t.Errorf("a change to the copy reached the original: %+v", src)
	}
}
