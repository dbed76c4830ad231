package hostile_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// A mutation replaces the value at one path of a valid base config.
type mutation struct {
	path    []any  // string keys and int indexes from the root
	key     string // the key an error must name: the last string in path
	parent  string // the key above it, named instead when key is data (a sysctl name)
	variant string // "wrong type: string", "range: negative", ...
	wrong   bool   // a wrong JSON type (as opposed to a wrong value)
	value   any    // what goes there (json.Number for exact numbers)
}

func (m mutation) String() string { return pathString(m.path) + " = " + m.variant }

func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		}
	}
	return b.String()
}

// overlong is longer than any name the kernel or a file system takes (15
// bytes for an interface, 255 for a path component).
var overlong = strings.Repeat("x", 300)

type variant struct {
	name  string
	wrong bool
	value any
}

// wrongTypes are two values of other JSON types than what a key holds: a
// scalar and a container (or two scalars for a container), which between
// them meet every decoding path (a number where a string goes, an object
// where a number goes, ...) without running every pair.
func wrongTypes(holds string) []variant {
	str := variant{"wrong type: string", true, "7"}
	num := variant{"wrong type: number", true, json.Number("7")}
	obj := variant{"wrong type: object", true, map[string]any{}}
	arr := variant{"wrong type: array", true, []any{}}
	switch holds {
	case "string":
		return []variant{num, obj}
	case "number":
		return []variant{str, obj}
	case "bool":
		return []variant{str, arr}
	case "array":
		return []variant{obj, str}
	}
	return []variant{arr, str} // object
}

// variants are what replaces a value of v's JSON type: every other type,
// and values of the same type that are out of range.
func variants(v any) []variant {
	switch v.(type) {
	case json.Number:
		return append(wrongTypes("number"),
			variant{"range: negative", false, json.Number("-1")},
			variant{"range: fraction", false, json.Number("0.5")},
			variant{"range: above 2^32", false, json.Number("4294967296")},
			variant{"range: huge", false, json.Number("1e30")},
		)
	case string:
		return append(wrongTypes("string"),
			variant{"range: empty", false, ""},
			variant{"range: overlong", false, overlong},
			variant{"range: path escape", false, "../hostile-escape"},
		)
	case bool:
		return wrongTypes("bool")
	case []any:
		return append(wrongTypes("array"),
			variant{"range: empty", false, []any{}},
			variant{"range: null element", false, []any{nil}},
		)
	case map[string]any:
		return wrongTypes("object")
	}
	return nil
}

// mutations walks base (decoded with UseNumber) and returns every
// mutation of every key under it, nested objects and the first element of
// arrays included. Under prevResult only wrong types are made: which of
// its values are out of range depends on the plugin (common() has the
// prevResult cases that matter). skip reports paths whose subtree is not walked (the
// path itself is still mutated unless it is skipped too).
func mutations(base any, skip func(path string) (self, below bool)) []mutation {
	var out []mutation
	var walk func(path []any, v any)
	walk = func(path []any, v any) {
		p := pathString(path)
		self, below := skip(p)
		if len(path) > 0 && !self {
			var keys []string
			for _, p := range path {
				if s, ok := p.(string); ok {
					keys = append(keys, s)
				}
			}
			key, parent := keys[len(keys)-1], ""
			if len(keys) > 1 {
				parent = keys[len(keys)-2]
			}
			for _, va := range variants(v) {
				if va.wrong || !strings.HasPrefix(p, "prevResult") {
					out = append(out, mutation{path: append([]any(nil), path...), key: key, parent: parent, variant: va.name, wrong: va.wrong, value: va.value})
				}
			}
		}
		if below {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(v) {
				walk(append(append([]any(nil), path...), k), v[k])
			}
		case []any:
			if len(v) > 0 {
				walk(append(append([]any(nil), path...), 0), v[0])
			}
		}
	}
	walk(nil, base)
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// decode reads a config keeping numbers exact.
func decode(conf string) (any, error) {
	d := json.NewDecoder(strings.NewReader(conf))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// apply returns base (a config as text) with m's value at m's path.
func apply(base string, m mutation) ([]byte, error) {
	return set(base, m.path, m.value)
}

// set returns conf with value at path.
func set(conf string, path []any, value any) ([]byte, error) {
	root, err := decode(conf)
	if err != nil {
		return nil, err
	}
	if len(path) == 0 {
		return nil, fmt.Errorf("empty path")
	}
	cur := root
	for i, p := range path {
		last := i == len(path)-1
		switch p := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: not an object", pathString(path[:i]))
			}
			if last {
				m[p] = value
			} else {
				cur = m[p]
			}
		case int:
			a, ok := cur.([]any)
			if !ok || p >= len(a) {
				return nil, fmt.Errorf("%s: no element %d", pathString(path[:i]), p)
			}
			if last {
				a[p] = value
			} else {
				cur = a[p]
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
