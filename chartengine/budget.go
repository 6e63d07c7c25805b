package chartengine

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// A render's budget. maxOutput bounds what a template writes, but not the
// values it builds on the way: `{{ $s = cat $s $s }}` in a loop of 40
// doubles a string to terabytes, and the Go runtime's out-of-memory death
// cannot be recovered, so one chart would crash the controller on every
// restart. And text/template cannot be cancelled, so a nested range would
// hold a pass for good. Every template function is therefore wrapped: it
// first checks the render's clock, refuses a call whose result would
// obviously pass the budget before making it, and charges the size of
// what it returns to one counter per render; every output write is charged
// and clocked too.
var (
	// maxBuilt is the bytes (counted by valueSize) all function results
	// and writes of one render may add up to.
	maxBuilt int64 = 256 << 20
	// maxRenderTime is the wall clock one render may take.
	maxRenderTime = 20 * time.Second
)

// ErrBudget marks a render stopped by its budget.
var ErrBudget = errors.New("render budget")

// budget is one render's allowance.
type budget struct {
	used     int64
	deadline time.Time
}

func newBudget() *budget { return &budget{deadline: time.Now().Add(maxRenderTime)} }

// clock refuses to go on past the deadline.
func (b *budget) clock() error {
	if time.Now().After(b.deadline) {
		return fmt.Errorf("%w: the render ran longer than its limit of %s (a loop that does not end?)", ErrBudget, maxRenderTime)
	}
	return nil
}

// fits refuses a result of n bytes the budget cannot hold, before it is made.
func (b *budget) fits(name string, n int64) error {
	if n > maxBuilt-b.used {
		return fmt.Errorf("%w: %s would build %d bytes; the values built in one render may not pass %d MiB", ErrBudget, name, n, maxBuilt>>20)
	}
	return nil
}

// charge adds n bytes built by name.
func (b *budget) charge(name string, n int64) error {
	if err := b.fits(name, n); err != nil {
		return err
	}
	b.used += n
	return nil
}

// valueSize is the bytes a value stands for when written out or copied,
// counting a list or map that holds the same value twice twice (so a
// list of a list of ... doubling at every level is seen for what
// deepCopy or toJson would make of it). It stops counting past limit, so
// its own cost is bounded by the budget.
func valueSize(v any, limit int64) int64 {
	var n int64
	var walk func(reflect.Value)
	walk = func(v reflect.Value) {
		n += 16
		if n > limit || !v.IsValid() {
			return
		}
		switch v.Kind() {
		case reflect.String:
			n += int64(v.Len())
		case reflect.Slice, reflect.Array:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				n += int64(v.Len())
				return
			}
			for i := 0; i < v.Len() && n <= limit; i++ {
				walk(v.Index(i))
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() && n <= limit {
				walk(it.Key())
				walk(it.Value())
			}
		case reflect.Interface, reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField() && n <= limit; i++ {
				walk(v.Field(i))
			}
		default:
			n += 8
		}
	}
	walk(reflect.ValueOf(v))
	return n
}

// passThrough are functions that return one of their arguments, a part of
// one, or a small scalar: they build nothing worth charging, and charging
// them would bill the same values over and over (`get`, `default` on a
// large map in a loop).
var passThrough = map[string]bool{
	"index": true, "slice": true, "len": true, "and": true, "or": true, "not": true,
	"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true, "call": true,
	"get": true, "first": true, "mustFirst": true, "last": true, "mustLast": true, "default": true,
	"coalesce": true, "ternary": true, "empty": true, "required": true, "fail": true, "dig": true,
	"hasKey": true, "has": true, "mustHas": true, "set": true, "unset": true, "merge": true,
	"mustMerge": true, "mergeOverwrite": true, "mustMergeOverwrite": true, "kindIs": true,
	"kindOf": true, "typeOf": true, "typeIs": true, "typeIsLike": true, "deepEqual": true,
}

// wrapFuncs wraps every function of fm with b: the clock, a check before
// the call for the functions whose result can be much larger than their
// arguments (estimate), and the charge for the result.
func wrapFuncs(fm map[string]any, b *budget) {
	for name, f := range fm {
		fv := reflect.ValueOf(f)
		ft := fv.Type()
		est := estimators[name]
		free := passThrough[name]
		fm[name] = reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
			// text/template turns a panic in a function into an error
			// naming the function, the template and its line.
			if err := b.clock(); err != nil {
				panic(err)
			}
			if est != nil {
				if err := b.fits(name, est(args, maxBuilt-b.used+1)); err != nil {
					panic(err)
				}
			}
			var out []reflect.Value
			if ft.IsVariadic() {
				out = fv.CallSlice(args)
			} else {
				out = fv.Call(args)
			}
			if !free && len(out) > 0 {
				if err := b.charge(name, valueSize(out[0].Interface(), maxBuilt-b.used+1)); err != nil {
					panic(err)
				}
			}
			return out
		}).Interface()
	}
}

// An estimator bounds the size of a function's result from its arguments,
// reading no more than limit of them.
type estimator func(args []reflect.Value, limit int64) int64

// argsSize is the size of the arguments, flattened: what a function that
// joins or serialises them makes, times a factor for escaping.
func argsSize(factor int64) estimator {
	return func(args []reflect.Value, limit int64) int64 {
		var n int64
		for _, a := range flatArgs(args) {
			n += valueSize(a, limit/factor+1)
		}
		return n * factor
	}
}

// flatArgs spreads a variadic call's last argument.
func flatArgs(args []reflect.Value) []any {
	var out []any
	for _, a := range args {
		if a.Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.Interface {
			for i := 0; i < a.Len(); i++ {
				out = append(out, a.Index(i).Interface())
			}
			continue
		}
		out = append(out, a.Interface())
	}
	return out
}

func str(v reflect.Value) string {
	if v.Kind() == reflect.String {
		return v.String()
	}
	if v.Kind() == reflect.Interface && !v.IsNil() {
		return str(v.Elem())
	}
	return fmt.Sprint(v.Interface())
}

func integer(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Interface:
		if !v.IsNil() {
			return integer(v.Elem())
		}
	}
	return 0
}

// estimators are the functions whose result can outgrow their arguments.
var estimators = map[string]estimator{
	"cat": argsSize(1), "print": argsSize(2), "println": argsSize(2), "list": argsSize(1),
	"toJson": argsSize(6), "mustToJson": argsSize(6), "toRawJson": argsSize(2), "mustToRawJson": argsSize(2),
	"toPrettyJson": argsSize(8), "mustToPrettyJson": argsSize(8), "toYaml": argsSize(8),
	"toString": argsSize(2), "toStrings": argsSize(2), "deepCopy": argsSize(1), "mustDeepCopy": argsSize(1),
	"quote": argsSize(6), "squote": argsSize(2), "html": argsSize(6), "js": argsSize(6), "urlquery": argsSize(3),
	"b64enc": argsSize(2), "b32enc": argsSize(2), "concat": argsSize(1), "append": argsSize(1),
	"mustAppend": argsSize(1), "push": argsSize(1), "mustPush": argsSize(1), "prepend": argsSize(1),
	"mustPrepend": argsSize(1), "dict": argsSize(1), "tuple": argsSize(1),
	"printf": printfSize,
	"indent": indentSize, "nindent": indentSize,
	"replace": func(a []reflect.Value, _ int64) int64 { return replaceSize(str(a[0]), str(a[1]), str(a[2])) },
	"join": func(a []reflect.Value, limit int64) int64 {
		v, items := a[1], int64(1)
		for v.Kind() == reflect.Interface && !v.IsNil() {
			v = v.Elem()
		}
		if v.Kind() == reflect.Slice || v.Kind() == reflect.Array {
			items = int64(v.Len())
		}
		return 2*valueSize(v.Interface(), limit) + items*int64(len(str(a[0])))
	},
	"wrapWith": func(a []reflect.Value, _ int64) int64 {
		every := max(integer(a[0]), 1)
		s := int64(len(str(a[2])))
		return s + (s/every+1)*int64(len(str(a[1])))
	},
	"regexReplaceAll":            regexSize(true),
	"mustRegexReplaceAll":        regexSize(true),
	"regexReplaceAllLiteral":     regexSize(false),
	"mustRegexReplaceAllLiteral": regexSize(false),
}

// indentSize: indent N s puts N spaces before every line of s.
func indentSize(a []reflect.Value, _ int64) int64 {
	s := str(a[1])
	return int64(len(s)) + 1 + int64(strings.Count(s, "\n")+1)*max(integer(a[0]), 0)
}

// replaceSize: replace OLD NEW s puts NEW in place of every OLD.
func replaceSize(old, repl, s string) int64 {
	n := int64(strings.Count(s, old))
	if old == "" {
		n = int64(utf8.RuneCountInString(s) + 1)
	}
	return int64(len(s)) + n*int64(len(repl))
}

// regexSize: each match becomes the replacement, and with expand a $
// reference in it can bring back the whole match.
func regexSize(expand bool) estimator {
	return func(a []reflect.Value, _ int64) int64 {
		re, err := regexp.Compile(str(a[0]))
		if err != nil {
			return 0 // the function reports the pattern itself
		}
		s, repl := str(a[1]), str(a[2])
		refs := int64(0)
		if expand {
			refs = int64(strings.Count(repl, "$"))
		}
		n := int64(len(s))
		for _, m := range re.FindAllStringIndex(s, -1) {
			n += int64(len(repl)) + refs*int64(m[1]-m[0])
		}
		return n
	}
}

// printfSize: the format, each argument escaped at worst, and the padding
// every width and precision in the format asks for. A width taken from an
// argument (*) counts that argument.
func printfSize(a []reflect.Value, limit int64) int64 {
	format := str(a[0])
	args := flatArgs(a[1:])
	n := int64(len(format)) + argsSize(6)(a[1:], limit)
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format) && strings.IndexByte("+-# 0123456789.*[]", format[i]) >= 0; i++ {
			switch c := format[i]; {
			case c == '*':
				for _, v := range args {
					if k, ok := v.(int); ok && k > 0 {
						n += int64(k)
					}
				}
			case c >= '1' && c <= '9':
				w := int64(0)
				for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
					w = min(w*10+int64(format[i]-'0'), 1<<40)
				}
				n += w
				i--
			}
		}
	}
	return n
}
