package gobrpc

import (
	"fmt"
	"io"
	"reflect"
)

// state decodes one message. Its error is sticky: once set, reads return
// zero and loops stop.
type state struct {
	d      *Decoder
	b      []byte
	budget int // bytes the decoded values may still allocate
	err    error
}

func (s *state) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("gob: "+format, args...)
	}
}

func (s *state) ReadByte() (byte, error) {
	if len(s.b) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c, nil
}

func (s *state) uint() uint64 {
	if s.err != nil {
		return 0
	}
	x, err := readUint(s)
	if err != nil {
		s.fail("%v", err)
	}
	return x
}

// bytes reads a length and that many bytes (aliasing the message).
func (s *state) bytes() []byte {
	n := s.uint()
	if n > uint64(len(s.b)) {
		s.fail("length %d exceeds the %d bytes left in the message", n, len(s.b))
		return nil
	}
	b := s.b[:n]
	s.b = s.b[n:]
	return b
}

// count reads an element count, bounded by the bytes left: every element
// takes at least one.
func (s *state) count() int {
	n := s.uint()
	if n > uint64(len(s.b)) {
		s.fail("count %d exceeds the %d bytes left in the message", n, len(s.b))
		return 0
	}
	return int(n)
}

func (s *state) alloc(n uint64) bool {
	if n > uint64(s.budget) {
		s.fail("values too large for a %d-byte message", s.budget)
		return false
	}
	s.budget -= int(n)
	return true
}

func (s *state) mismatch(id typeID, v reflect.Value) {
	name := basicName(id)
	if w := s.d.wire(id); w != nil {
		name = w.name()
	}
	s.fail("type mismatch: %s (type id %d) received into %s", name, id, v.Type())
}

// top decodes a message's value: a struct as is, anything else as a
// struct of one field (delta 0).
func (s *state) top(id typeID, v reflect.Value) {
	if w := s.d.wire(id); w == nil || w.StructT == nil {
		if s.uint() != 0 {
			s.fail("non-zero field delta for a value that is not a struct")
		}
	}
	s.value(id, v, 0)
}

// value decodes one value of wire type id into v, or skips it when v is
// the zero Value. Pointers in v are allocated on the way.
func (s *state) value(id typeID, v reflect.Value, depth int) {
	if depth > maxDepth {
		s.fail("values nested deeper than %d", maxDepth)
	}
	for s.err == nil && v.IsValid() && v.Kind() == reflect.Pointer {
		if v.IsNil() {
			if !s.alloc(uint64(v.Type().Elem().Size())) {
				return
			}
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	if s.err != nil {
		return
	}
	switch id {
	case tBool, tInt, tUint:
		s.scalar(id, v)
	case tFloat, tComplex:
		s.uint()
		if id == tComplex {
			s.uint()
		}
		if v.IsValid() {
			s.mismatch(id, v)
		}
	case tBytes, tString:
		b := s.bytes()
		switch {
		case s.err != nil || !v.IsValid():
		case id == tString && v.Kind() == reflect.String:
			if s.alloc(uint64(len(b))) {
				v.SetString(string(b))
			}
		case id == tBytes && v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
			if s.alloc(uint64(len(b))) {
				v.SetBytes(append([]byte(nil), b...))
			}
		default:
			s.mismatch(id, v)
		}
	case tInterface:
		s.fail("interface values are not supported")
	default:
		s.composite(id, v, depth)
	}
}

func (s *state) scalar(id typeID, v reflect.Value) {
	u := s.uint()
	if s.err != nil || !v.IsValid() {
		return
	}
	switch k := v.Kind(); {
	case id == tBool && k == reflect.Bool:
		v.SetBool(u != 0)
	case id == tInt && k >= reflect.Int && k <= reflect.Int64:
		if i := intFromUint(u); !v.OverflowInt(i) {
			v.SetInt(i)
		} else {
			s.fail("value %d out of range for %s", i, v.Type())
		}
	case id == tUint && k >= reflect.Uint && k <= reflect.Uintptr:
		if !v.OverflowUint(u) {
			v.SetUint(u)
		} else {
			s.fail("value %d out of range for %s", u, v.Type())
		}
	default:
		s.mismatch(id, v)
	}
}

func (s *state) composite(id typeID, v reflect.Value, depth int) {
	w := s.d.wire(id)
	switch {
	case w == nil:
		s.fail("type id %d is not defined", id)
	case w.StructT != nil:
		s.structValue(id, w.StructT, v, depth)
	case w.SliceT != nil:
		s.slice(w.SliceT.Elem, v, depth)
	case v.IsValid():
		s.fail("%s (type id %d) is not supported", w.name(), id)
	case w.ArrayT != nil:
		if n := s.count(); s.err == nil && n != w.ArrayT.Len {
			s.fail("array of %d elements sent as %d", w.ArrayT.Len, n)
		} else {
			for i := 0; i < n && s.err == nil; i++ {
				s.value(w.ArrayT.Elem, v, depth+1)
			}
		}
	case w.MapT != nil:
		n := s.count()
		for i := 0; i < n && s.err == nil; i++ {
			s.value(w.MapT.Key, v, depth+1)
			s.value(w.MapT.Elem, v, depth+1)
		}
	case w.GobEncoderT != nil || w.BinaryMarshalerT != nil || w.TextMarshalerT != nil:
		s.bytes()
	default:
		s.fail("type id %d has an empty definition", id)
	}
}

func (s *state) slice(elem typeID, v reflect.Value, depth int) {
	n := s.count()
	if s.err != nil {
		return
	}
	if !v.IsValid() {
		for i := 0; i < n && s.err == nil; i++ {
			s.value(elem, v, depth+1)
		}
		return
	}
	if v.Kind() != reflect.Slice {
		s.fail("type mismatch: slice received into %s", v.Type())
		return
	}
	if n == 0 {
		v.SetLen(0) // a nil slice stays nil, as gob leaves it
		return
	}
	if !s.alloc(uint64(n) * uint64(v.Type().Elem().Size())) {
		return
	}
	sl := reflect.MakeSlice(v.Type(), n, n)
	for i := 0; i < n && s.err == nil; i++ {
		s.value(elem, sl.Index(i), depth+1)
	}
	v.Set(sl)
}

func (s *state) structValue(id typeID, st *structType, v reflect.Value, depth int) {
	var plan []int
	if v.IsValid() {
		if v.Kind() != reflect.Struct {
			s.mismatch(id, v)
			return
		}
		var err error
		if plan, err = s.d.plan(id, st, v.Type()); err != nil {
			s.err = err
			return
		}
	}
	field := -1
	for s.err == nil {
		delta := s.uint()
		if delta == 0 {
			return
		}
		if delta >= uint64(len(st.Field)-field) {
			s.fail("field number %d+%d out of range for %s (%d fields)", field, delta, st.CommonType.Name, len(st.Field))
			return
		}
		field += int(delta)
		var fv reflect.Value
		if plan != nil && plan[field] >= 0 {
			fv = v.Field(plan[field])
		}
		s.value(st.Field[field].Id, fv, depth+1)
	}
}
