package compose

import (
	"reflect"
	"sync"
)

// deepCopy returns a copy of v that shares no pointer, slice, map or
// interface value with it, so a caller may change what a memo handed out
// without changing the memo. nil stays nil and empty stays empty: drift
// comparisons and deploys can tell the two apart. Unexported fields are
// copied as they are (time.Time holds only a location pointer, which is
// immutable); channels and functions, which are not data, are shared.
func deepCopy[T any](v T) T {
	var out T
	src := reflect.ValueOf(&v).Elem()
	copierOf(src.Type())(reflect.ValueOf(&out).Elem(), src)
	return out
}

// copier sets dst, settable and zero, to a deep copy of src.
type copier func(dst, src reflect.Value)

// copiers holds one copier per type, built on first use: the reflection
// that decides how to copy a type is done once, not for every value.
var copiers sync.Map // reflect.Type → copier

func copierOf(t reflect.Type) copier {
	if c, ok := copiers.Load(t); ok {
		return c.(copier)
	}
	c := buildCopier(t, map[reflect.Type]*copier{})
	copiers.Store(t, c)
	return c
}

func assign(dst, src reflect.Value) { dst.Set(src) }

// buildCopier makes t's copier; building maps the types under
// construction, so a recursive type calls its own copier through it.
func buildCopier(t reflect.Type, building map[reflect.Type]*copier) copier {
	if isFlat(t, map[reflect.Type]bool{}) {
		return assign
	}
	if c, ok := building[t]; ok {
		return func(dst, src reflect.Value) { (*c)(dst, src) }
	}
	var c copier
	building[t] = &c
	switch t.Kind() {
	case reflect.Pointer:
		elem := buildCopier(t.Elem(), building)
		c = func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			n := reflect.New(t.Elem())
			elem(n.Elem(), src.Elem())
			dst.Set(n)
		}
	case reflect.Slice:
		elem := buildCopier(t.Elem(), building)
		flat := isFlat(t.Elem(), map[reflect.Type]bool{})
		c = func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			n := reflect.MakeSlice(t, src.Len(), src.Len())
			if flat {
				reflect.Copy(n, src)
			} else {
				for i := range src.Len() {
					elem(n.Index(i), src.Index(i))
				}
			}
			dst.Set(n)
		}
	case reflect.Map:
		key, elem := buildCopier(t.Key(), building), buildCopier(t.Elem(), building)
		flatKey, flatElem := isFlat(t.Key(), map[reflect.Type]bool{}), isFlat(t.Elem(), map[reflect.Type]bool{})
		c = func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			n := reflect.MakeMapWithSize(t, src.Len())
			it := src.MapRange()
			for it.Next() {
				k, v := it.Key(), it.Value()
				if !flatKey {
					nk := reflect.New(t.Key()).Elem()
					key(nk, k)
					k = nk
				}
				if !flatElem {
					nv := reflect.New(t.Elem()).Elem()
					elem(nv, v)
					v = nv
				}
				n.SetMapIndex(k, v)
			}
			dst.Set(n)
		}
	case reflect.Interface:
		c = func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			e := src.Elem()
			n := reflect.New(e.Type()).Elem()
			copierOf(e.Type())(n, e)
			dst.Set(n)
		}
	case reflect.Array:
		elem := buildCopier(t.Elem(), building)
		c = func(dst, src reflect.Value) {
			for i := range src.Len() {
				elem(dst.Index(i), src.Index(i))
			}
		}
	case reflect.Struct:
		type field struct {
			index int
			copy  copier
		}
		var deep []field
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() && !isFlat(f.Type, map[reflect.Type]bool{}) {
				deep = append(deep, field{i, buildCopier(f.Type, building)})
			}
		}
		c = func(dst, src reflect.Value) {
			dst.Set(src) // unexported fields, and every flat one
			for _, f := range deep {
				d := dst.Field(f.index)
				d.SetZero()
				f.copy(d, src.Field(f.index))
			}
		}
	default:
		c = assign
	}
	return c
}

// isFlat reports whether a value of t holds no reference reachable through
// its exported fields, so that one assignment copies it.
func isFlat(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	defer delete(seen, t)
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return false
	case reflect.Array:
		return isFlat(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() && !isFlat(f.Type, seen) {
				return false
			}
		}
	}
	return true
}
