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
// immutable).
func deepCopy[T any](v T) T {
	var out T
	src := reflect.ValueOf(&v).Elem()
	dst := reflect.ValueOf(&out).Elem()
	copyValue(dst, src)
	return out
}

// flatTypes remembers, per type, whether a value of it holds no reference
// at all, so that it can be copied with one assignment. Most leaves of a
// ServiceSpec are such types.
var flatTypes sync.Map // reflect.Type → bool

func isFlat(t reflect.Type) bool {
	if f, ok := flatTypes.Load(t); ok {
		return f.(bool)
	}
	flat := computeFlat(t, map[reflect.Type]bool{})
	flatTypes.Store(t, flat)
	return flat
}

func computeFlat(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false // recursive through a reference: not flat
	}
	seen[t] = true
	defer delete(seen, t)
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return false
	case reflect.Array:
		return computeFlat(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue // copied by assignment; see deepCopy
			}
			if !computeFlat(f.Type, seen) {
				return false
			}
		}
	}
	return true
}

// copyValue sets dst, settable and of src's type, to a deep copy of src.
func copyValue(dst, src reflect.Value) {
	t := src.Type()
	if isFlat(t) {
		dst.Set(src)
		return
	}
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		n := reflect.New(t.Elem())
		copyValue(n.Elem(), src.Elem())
		dst.Set(n)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		n := reflect.MakeSlice(t, src.Len(), src.Len())
		if isFlat(t.Elem()) {
			reflect.Copy(n, src)
		} else {
			for i := range src.Len() {
				copyValue(n.Index(i), src.Index(i))
			}
		}
		dst.Set(n)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		n := reflect.MakeMapWithSize(t, src.Len())
		flatKey, flatElem := isFlat(t.Key()), isFlat(t.Elem())
		it := src.MapRange()
		for it.Next() {
			k, v := it.Key(), it.Value()
			if !flatKey {
				nk := reflect.New(t.Key()).Elem()
				copyValue(nk, k)
				k = nk
			}
			if !flatElem {
				nv := reflect.New(t.Elem()).Elem()
				copyValue(nv, v)
				v = nv
			}
			n.SetMapIndex(k, v)
		}
		dst.Set(n)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		e := src.Elem()
		n := reflect.New(e.Type()).Elem()
		copyValue(n, e)
		dst.Set(n)
	case reflect.Array:
		for i := range src.Len() {
			copyValue(dst.Index(i), src.Index(i))
		}
	case reflect.Struct:
		dst.Set(src) // unexported fields, and every flat one
		for i := range src.NumField() {
			if !t.Field(i).IsExported() || isFlat(t.Field(i).Type) {
				continue
			}
			copyValue(dst.Field(i), src.Field(i))
		}
	default:
		// Channels and functions are not data; they are shared, and a
		// ServiceSpec holds none.
		dst.Set(src)
	}
}
