package result

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
)

// DecodeConfig unmarshals data, a network config, into v, and gives every
// failure its CNI code and a message a user can act on:
//
//   - a value of the wrong JSON type, or a number the key's Go type cannot
//     hold (a negative one for an unsigned key, 300 for a byte, 1.5 for an
//     integer) is an invalid config, code 7, named by its JSON path as the
//     user wrote it and its literal value:
//     `ipam.ranges[0][1].subnet: 5 is not a string`;
//   - a value a key's own parser refuses ("abc" for an IP address) is code
//     7 as well, naming the key when the value occurs once in data;
//   - what is not JSON at all is code 6 (failed to decode), with the line
//     and column.
//
// encoding/json names the field by Go's path (embedded struct names
// included, list indices and map keys left out), so the key is found again
// in data from the error's offset. Every plugin decodes its config through
// here, so that no Go type name reaches a runtime.
func DecodeConfig(data []byte, v any) error {
	return DecodeConfigAt("", data, v)
}

// DecodeConfigAt is DecodeConfig for a part of a config found at path
// (such as "ipam.routes[2]"), which prefixes every key it names.
func DecodeConfigAt(path string, data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	var synErr *json.SyntaxError
	var parseErr *net.ParseError
	var invalid *json.InvalidUnmarshalError
	switch {
	case errors.As(err, &typeErr):
		return InvalidConfig(errors.New(describeTypeError(path, data, typeErr)))
	case errors.As(err, &synErr):
		line, col := lineCol(data, synErr.Offset)
		where := "config"
		if path != "" {
			where = path
		}
		return Decoding(fmt.Errorf("parse %s: line %d, column %d: %s", where, line, col, synErr.Error()))
	case errors.As(err, &invalid):
		return err // a programming error, not the user's
	case errors.As(err, &parseErr):
		if key, ok := findString(data, parseErr.Text); ok {
			return InvalidConfig(fmt.Errorf("%s: %q is not %s", joinPath(path, key), parseErr.Text, article(parseErr.Type)))
		}
		return InvalidConfig(fmt.Errorf("%s%s", prefix(path), err))
	default:
		// A key's own UnmarshalJSON or UnmarshalText refused its value.
		return InvalidConfig(fmt.Errorf("%s%s", prefix(path), err))
	}
}

func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

func article(s string) string {
	if s == "" {
		return "valid"
	}
	switch s[0] {
	case 'a', 'e', 'i', 'o', 'u', 'I':
		return "an " + s
	}
	return "a " + s
}

func joinPath(base, key string) string {
	switch {
	case base == "":
		return key
	case key == "":
		return base
	case strings.HasPrefix(key, "["):
		return base + key
	}
	return base + "." + key
}

// describeTypeError says which key holds what, and what the key takes.
func describeTypeError(path string, data []byte, e *json.UnmarshalTypeError) string {
	// A key's own UnmarshalJSON decodes its value on its own, so the
	// offset may point into another value: trust it only when the kinds
	// agree, else look for the one value of that kind under that key.
	kind, _, _ := strings.Cut(e.Value, " ")
	key, value, ok := locate(data, e.Offset)
	if ok && kindOf(value) != kind {
		key, value, ok = findKind(data, e.Field, kind)
	}
	if !ok {
		// Go's path: good enough when the key is not found again.
		key, value = e.Field, e.Value
		if i := strings.IndexByte(value, ' '); i > 0 {
			value = value[i+1:] // "number -1" → "-1"
		}
	}
	return fmt.Sprintf("%s: %s is not %s", joinPath(path, key), value, want(e.Type))
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// want describes, for a user, the values a Go type takes.
func want(t reflect.Type) string {
	if t == nil {
		return "of the right type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Int8, reflect.Int16, reflect.Int32:
		bits := t.Bits()
		return fmt.Sprintf("a whole number from %d to %d", -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1)
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return "a whole number, 0 or more"
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<t.Bits()-1)
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "of the right type"
}

// maxLiteral bounds how much of a value a message quotes.
const maxLiteral = 64

// locate finds the value that encoding/json refused at offset off and
// returns its path ("ipam.ranges[0][1].subnet") and, for a scalar, its
// literal text; for a list or object, which one it is. encoding/json's
// offset is the end of a scalar, or just past the opening bracket of a list
// or object.
func locate(data []byte, off int64) (path, value string, ok bool) {
	walk(data, func(p string, tok json.Token, start, end int64) bool {
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if start+1 != off {
				return false
			}
			path, value, ok = p, "a list", true
			if tok == json.Delim('{') {
				value = "an object"
			}
			return true
		}
		if start < off && off <= end {
			lit := string(data[start:end])
			if len(lit) > maxLiteral {
				lit = lit[:maxLiteral] + "..."
			}
			path, value, ok = p, lit, true
			return true
		}
		return false
	})
	return path, value, ok
}

// kindOf is encoding/json's name for the kind of a literal as locate
// returns it.
func kindOf(lit string) string {
	switch {
	case lit == "an object":
		return "object"
	case lit == "a list":
		return "array"
	case strings.HasPrefix(lit, `"`):
		return "string"
	case lit == "true" || lit == "false":
		return "bool"
	case lit == "null":
		return "null"
	}
	return "number"
}

// findKind returns the path and literal of the one value of kind in data
// whose key is the last name in Go's field path.
func findKind(data []byte, goField, kind string) (path, value string, ok bool) {
	name := goField[strings.LastIndexByte(goField, '.')+1:]
	n := 0
	walk(data, func(p string, tok json.Token, start, end int64) bool {
		if !strings.HasSuffix(p, name) || (p != name && !strings.HasSuffix(p, "."+name)) {
			return false
		}
		lit := string(data[start:end])
		switch tok {
		case json.Delim('{'):
			lit = "an object"
		case json.Delim('['):
			lit = "a list"
		}
		if kindOf(lit) == kind {
			if len(lit) > maxLiteral {
				lit = lit[:maxLiteral] + "..."
			}
			path, value = p, lit
			n++
		}
		return false
	})
	return path, value, n == 1
}

// findString returns the path of the one string value in data equal to s.
func findString(data []byte, s string) (string, bool) {
	var found []string
	walk(data, func(p string, tok json.Token, _, _ int64) bool {
		if str, isStr := tok.(string); isStr && str == s {
			found = append(found, p)
		}
		return false
	})
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// walk calls visit with every value in data (a scalar, or the opening
// bracket of a list or object), its path and its byte span, in document
// order, until visit returns true or data ends.
func walk(data []byte, visit func(path string, tok json.Token, start, end int64) bool) {
	type frame struct {
		obj     bool
		key     string
		idx     int
		wantKey bool
	}
	var stack []*frame
	cur := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.obj {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.idx)
			}
		}
		return b.String()
	}
	advance := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].obj {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].idx++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		start := dec.InputOffset()
		for start < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[start]) >= 0 {
			start++
		}
		tok, err := dec.Token()
		if err != nil {
			return
		}
		end := dec.InputOffset()
		n := len(stack)
		if d, isDelim := tok.(json.Delim); isDelim && (d == '}' || d == ']') {
			stack = stack[:n-1]
			advance()
			continue
		}
		if n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			stack[n-1].key, _ = tok.(string)
			stack[n-1].wantKey = false
			continue
		}
		if visit(cur(), tok, start, end) {
			return
		}
		if d, isDelim := tok.(json.Delim); isDelim {
			stack = append(stack, &frame{obj: d == '{', wantKey: true})
			continue
		}
		advance()
	}
}

// lineCol turns a byte offset into data into a 1-based line and column.
func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col < 1 {
		col = 1
	}
	return line, col
}

// ValidateIPAMType refuses an IPAM type that is empty or could name a
// binary outside CNI_PATH. It lives here, with the config decoding, so that
// the frame (pkg/attach) checks "ipam.type" of every config without linking
// the delegation (pkg/ipam), which only the plugins that use IPAM link.
func ValidateIPAMType(t string) error {
	if t == "" {
		return errors.New("ipam.type: missing")
	}
	if strings.ContainsAny(t, `/\`) || t == "." || t == ".." {
		return fmt.Errorf("ipam.type: %q must be a plugin name, not a path", t)
	}
	return nil
}
