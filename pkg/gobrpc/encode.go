package gobrpc

import (
	"encoding"
	"fmt"
	"io"
	"reflect"
)

// An Encoder writes one gob stream: each type is defined the first time
// a value of it is sent, as gob's Encoder does. Not safe for concurrent
// use.
type Encoder struct {
	w       io.Writer
	ids     map[reflect.Type]typeID // types defined on this stream
	next    typeID
	pending []definition // assigned by typeID, not yet written
	buf     []byte
}

type definition struct {
	id   typeID
	wire *wireType
}

// NewEncoder returns an encoder writing to w.
func NewEncoder(w io.Writer) *Encoder {
	return &Encoder{w: w, ids: map[reflect.Type]typeID{}, next: firstUserID}
}

// Encode writes v (a value or a non-nil pointer to one) with the
// definitions of the types it uses that the stream lacks. It writes
// nothing when v's type is outside the subset.
func (e *Encoder) Encode(v any) error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return fmt.Errorf("gob: cannot encode nil pointer of type %s", rv.Type())
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return fmt.Errorf("gob: cannot encode nil value")
	}
	mark := len(e.pending)
	id, err := e.typeID(rv.Type())
	if err != nil {
		// Forget the ids handed out for this value's types: they were
		// never defined on the stream.
		for _, d := range e.pending[mark:] {
			for t, tid := range e.ids {
				if tid == d.id {
					delete(e.ids, t)
				}
			}
		}
		e.pending = e.pending[:mark]
		return err
	}
	// The definitions stay pending until a value that uses them is
	// written: a value that fails to encode (a nil slice element) writes
	// nothing, and the next one sends them.
	out := e.buf[:0]
	for _, d := range e.pending {
		msg := appendInt(nil, -int64(d.id))
		if msg, err = appendStruct(msg, reflect.ValueOf(d.wire).Elem()); err != nil {
			return err
		}
		out = appendMessage(out, msg)
	}
	msg := appendInt(nil, int64(id))
	if rv.Kind() == reflect.Struct {
		msg, err = appendStruct(msg, rv)
	} else {
		msg = append(msg, 0) // singleton: field delta 0
		msg, err = appendValue(msg, rv)
	}
	if err != nil {
		return err
	}
	out = appendMessage(out, msg)
	e.buf, e.pending = out, e.pending[:0]
	_, err = e.w.Write(out)
	return err
}

func appendMessage(out, msg []byte) []byte {
	return append(appendUint(out, uint64(len(msg))), msg...)
}

var (
	gobEncoderIface     = reflect.TypeFor[interface{ GobEncode() ([]byte, error) }]()
	binaryMarshalerType = reflect.TypeFor[encoding.BinaryMarshaler]()
)

// base strips pointers: gob sends *T as T.
func base(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func typeName(t reflect.Type) string {
	if t.Name() != "" {
		return t.Name()
	}
	return t.String()
}

// typeID returns t's id on this stream, assigning ids to t and the types
// it reaches and queueing their definitions when they are new.
func (e *Encoder) typeID(t reflect.Type) (typeID, error) {
	t = base(t)
	if id, ok := e.ids[t]; ok {
		return id, nil
	}
	// gob would encode these through their own methods: we cannot.
	if t.Implements(gobEncoderIface) || reflect.PointerTo(t).Implements(gobEncoderIface) ||
		t.Implements(binaryMarshalerType) || reflect.PointerTo(t).Implements(binaryMarshalerType) {
		return 0, fmt.Errorf("gob: type %s encodes itself (GobEncode/MarshalBinary): not supported", t)
	}
	switch t.Kind() {
	case reflect.Bool:
		return tBool, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return tInt, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return tUint, nil
	case reflect.String:
		return tString, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return tBytes, nil
		}
		id := e.assign(t)
		st := &sliceType{CommonType: CommonType{Name: typeName(t), Id: id}}
		e.pending = append(e.pending, definition{id, &wireType{SliceT: st}})
		elem, err := e.typeID(t.Elem())
		st.Elem = elem
		return id, err
	case reflect.Struct:
		id := e.assign(t)
		st := &structType{CommonType: CommonType{Name: typeName(t), Id: id}}
		e.pending = append(e.pending, definition{id, &wireType{StructT: st}})
		for i := range t.NumField() {
			f := t.Field(i)
			if !sent(f) {
				continue
			}
			fid, err := e.typeID(f.Type)
			if err != nil {
				return 0, fmt.Errorf("field %s.%s: %w", typeName(t), f.Name, err)
			}
			st.Field = append(st.Field, fieldType{Name: f.Name, Id: fid})
		}
		return id, nil
	}
	return 0, fmt.Errorf("gob: type %s (%s) is outside what gobrpc encodes", t, t.Kind())
}

func (e *Encoder) assign(t reflect.Type) typeID {
	id := e.next
	e.next++
	e.ids[t] = id
	return id
}

// sent reports whether gob sends field f: an exported one. An embedded
// struct is one field named for its type; its fields are not promoted.
func sent(f reflect.StructField) bool {
	return f.IsExported()
}

// appendStruct appends v's fields: (delta, value) pairs for the fields
// that are not zero, then delta 0.
func appendStruct(b []byte, v reflect.Value) ([]byte, error) {
	t := v.Type()
	num, last := -1, -1
	for i := range t.NumField() {
		if !sent(t.Field(i)) {
			continue
		}
		num++
		f := v.Field(i)
		for f.Kind() == reflect.Pointer {
			if f.IsNil() {
				break
			}
			f = f.Elem()
		}
		if omitted(f) {
			continue
		}
		b = appendUint(b, uint64(num-last))
		last = num
		var err error
		if b, err = appendValue(b, f); err != nil {
			return nil, err
		}
	}
	return append(b, 0), nil
}

// omitted reports whether a struct field is left out: zero (or a nil
// pointer). A struct is always sent, even when zero, as gob does.
func omitted(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return true // nil: appendStruct flattened any other
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.String, reflect.Slice:
		return v.Len() == 0
	}
	return false
}

// appendValue appends v (not a pointer) itself, zero or not.
func appendValue(b []byte, v reflect.Value) ([]byte, error) {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return appendInt(b, v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return appendUint(b, v.Uint()), nil
	case reflect.String:
		return append(appendUint(b, uint64(v.Len())), v.String()...), nil
	case reflect.Struct:
		return appendStruct(b, v)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return append(appendUint(b, uint64(v.Len())), v.Bytes()...), nil
		}
		b = appendUint(b, uint64(v.Len()))
		for i := range v.Len() {
			el := v.Index(i)
			for el.Kind() == reflect.Pointer {
				if el.IsNil() {
					return nil, fmt.Errorf("gob: nil element in %s", v.Type())
				}
				el = el.Elem()
			}
			var err error
			if b, err = appendValue(b, el); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("gob: cannot encode %s", v.Type())
}
