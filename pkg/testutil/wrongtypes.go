package testutil

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/result"
)

// WrongType is base with one key set to a value of the wrong type (or, for
// an unsigned key, a negative number).
type WrongType struct {
	Key   string // the key's JSON path as a user writes it: "ipam.ranges[0][0].subnet"
	Value string // the value as written in Stdin: `5`, `"x"`, `-1`
	Stdin []byte
}

// WrongTypes lists, for every string, boolean and numeric key that conf's
// type decodes (found by reflection over its json tags, through embedded
// structs, nested objects, lists and maps), configs that are base with that
// key alone holding a value of the wrong type: a number for a string, a
// string for a boolean or a number, a fraction for an integer, -1 for an
// unsigned one. A key added to a config struct is covered without touching
// the test. Keys holding raw JSON or an interface are left out; skip names
// keys (as WrongType.Key) to leave out as well.
func WrongTypes(conf any, base []byte, skip ...string) ([]WrongType, error) {
	var leaves []leaf
	collect(reflect.TypeOf(conf), nil, &leaves, 0)
	var out []WrongType
	for _, l := range leaves {
		key := l.key()
		if slices.Contains(skip, key) {
			continue
		}
		for _, v := range wrongValues(l.t) {
			var doc any
			dec := json.NewDecoder(bytes.NewReader(base))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				return nil, fmt.Errorf("base config: %w", err)
			}
			doc = setPath(doc, l.path, json.RawMessage(v))
			stdin, err := json.Marshal(doc)
			if err != nil {
				return nil, err
			}
			out = append(out, WrongType{Key: key, Value: v, Stdin: stdin})
		}
	}
	return out, nil
}

// CheckWrongTypes runs parse on every config of WrongTypes(conf, base) and
// asserts that it refuses each with code 7 (invalid config) and a message
// naming the key as written and the value ("ipam.ranges[0][0].subnet: 5").
func CheckWrongTypes(t *testing.T, conf any, base string, parse func(stdin []byte) error, skip ...string) {
	t.Helper()
	if err := parse([]byte(base)); err != nil {
		t.Fatalf("base config refused: %v", err)
	}
	cases, err := WrongTypes(conf, []byte(base), skip...)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no keys found in the config type")
	}
	for _, c := range cases {
		t.Run(c.Key+"="+c.Value, func(t *testing.T) {
			err := parse(c.Stdin)
			if err == nil {
				t.Fatalf("accepted %s", c.Stdin)
			}
			want := c.Key + ": " + c.Value
			if result.Code(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), want) {
				t.Errorf("got code %d %q, want code 7 naming %q\nstdin: %s", result.Code(err), err, want, c.Stdin)
			}
		})
	}
}

type seg struct {
	key   string // object key; "" for a list element or map entry
	index bool   // a list element: [0]
	entry bool   // a map entry, keyed "k"
}

type leaf struct {
	path []seg
	t    reflect.Type
}

func (l leaf) key() string {
	var b strings.Builder
	for _, s := range l.path {
		switch {
		case s.index:
			b.WriteString("[0]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			if s.entry {
				b.WriteString("k")
			} else {
				b.WriteString(s.key)
			}
		}
	}
	return b.String()
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

func collect(t reflect.Type, path []seg, out *[]leaf, depth int) {
	if depth > 8 {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return
	}
	pt := reflect.PointerTo(t)
	if t.Implements(textUnmarshaler) || pt.Implements(textUnmarshaler) ||
		t.Implements(jsonUnmarshaler) || pt.Implements(jsonUnmarshaler) {
		// Takes a string (net.IP, types.IPNet, ...); its own parser
		// reports what is not one.
		*out = append(*out, leaf{append([]seg(nil), path...), reflect.TypeFor[string]()})
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		// A key of the struct itself hides the same key of an embedded
		// struct, as encoding/json has it.
		own := map[string]bool{}
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); !f.Anonymous || name != "" {
				if name == "" {
					name = f.Name
				}
				own[name] = true
			}
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				var inner []leaf
				collect(f.Type, path, &inner, depth+1)
				for _, l := range inner {
					if !own[l.path[len(path)].key] {
						*out = append(*out, l)
					}
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			collect(f.Type, append(append([]seg(nil), path...), seg{key: name}), out, depth+1)
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return // []byte: base64 text
		}
		collect(t.Elem(), append(append([]seg(nil), path...), seg{index: true}), out, depth+1)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return
		}
		collect(t.Elem(), append(append([]seg(nil), path...), seg{entry: true}), out, depth+1)
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		*out = append(*out, leaf{append([]seg(nil), path...), t})
	}
}

func wrongValues(t reflect.Type) []string {
	switch t.Kind() {
	case reflect.String:
		return []string{"5"}
	case reflect.Bool:
		return []string{`"yes"`}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return []string{`"x"`, "1.5"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return []string{`"x"`, "-1"}
	case reflect.Float32, reflect.Float64:
		return []string{`"x"`}
	}
	return nil
}

// setPath returns doc with the value at path set to v, making (or
// replacing) the objects and one-element lists on the way; an object met
// on the way keeps its other keys, so that what the base config needs
// stays.
func setPath(doc any, path []seg, v any) any {
	if len(path) == 0 {
		return v
	}
	s := path[0]
	if s.index {
		var first any
		if l, ok := doc.([]any); ok && len(l) > 0 {
			first = l[0]
		}
		return []any{setPath(first, path[1:], v)}
	}
	m, ok := doc.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	key := s.key
	if s.entry {
		key = "k"
	}
	m[key] = setPath(m[key], path[1:], v)
	return m
}
