package gobrpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
)

// A Decoder reads one gob stream: the peer's type definitions, then
// values into Go values of the subset (see the package doc). Not safe for
// concurrent use.
type Decoder struct {
	r         *bufio.Reader
	types     map[typeID]*wireType // the peer's definitions
	typeBytes int
	plans     map[planKey][]int
	buf       []byte
}

// planKey is a struct on the wire decoded into a Go struct type; its plan
// maps each wire field to the Go field index that takes it (-1: skipped).
type planKey struct {
	id typeID
	t  reflect.Type
}

// NewDecoder returns a decoder reading from r. A *bufio.Reader is used as
// is (bytes it already buffered belong to the stream).
func NewDecoder(r io.Reader) *Decoder {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	return &Decoder{r: br, types: map[typeID]*wireType{}, plans: map[planKey][]int{}}
}

// Decode reads the next value into v, a non-nil pointer, or skips it when
// v is nil. It returns io.EOF when the stream ends between values. After
// an error in a value the stream stays usable (the message was read
// whole); after an error reading a message it does not.
func (d *Decoder) Decode(v any) error {
	var target reflect.Value
	if v != nil {
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Pointer || rv.IsNil() {
			return fmt.Errorf("gob: decode into %T, want a non-nil pointer", v)
		}
		target = rv.Elem()
	}
	for {
		msg, err := d.readMessage()
		if err != nil {
			return err
		}
		s := &state{d: d, b: msg, budget: 8*len(msg) + 64<<10}
		id := intFromUint(s.uint())
		switch {
		case s.err != nil:
			return s.err
		case id < 0:
			if err := d.define(typeID(-id), s); err != nil {
				return err
			}
			continue
		case id == 0:
			return errors.New("gob: value of type id 0")
		}
		s.top(typeID(id), target)
		if s.err == nil && len(s.b) != 0 {
			s.fail("%d bytes of extra data after the value", len(s.b))
		}
		return s.err
	}
}

func (d *Decoder) readMessage() ([]byte, error) {
	n, err := readUint(d.r)
	if err != nil {
		return nil, err
	}
	if n == 0 || n > MaxMessage {
		return nil, fmt.Errorf("gob: message of %d bytes (at most %d)", n, MaxMessage)
	}
	// Grow as the bytes arrive: a length claimed by a peer costs memory
	// only once it is sent.
	buf := d.buf[:0]
	for len(buf) < int(n) {
		chunk := min(int(n)-len(buf), 64<<10)
		buf = slices.Grow(buf, chunk)
		k, err := io.ReadFull(d.r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+k]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	d.buf = buf
	return buf, nil
}

func (d *Decoder) define(id typeID, s *state) error {
	if id < firstUserID || d.types[id] != nil {
		return fmt.Errorf("gob: type id %d defined twice or reserved", id)
	}
	if d.typeBytes += len(s.b); d.typeBytes > maxTypeBytes {
		return fmt.Errorf("gob: type definitions exceed %d bytes", maxTypeBytes)
	}
	w := new(wireType)
	s.top(tWireType, reflect.ValueOf(w).Elem())
	if s.err == nil && len(s.b) != 0 {
		s.fail("extra data after the definition of type %d", id)
	}
	if s.err != nil {
		return s.err
	}
	d.types[id] = w
	return nil
}

// wire returns the definition of a type id that is neither basic nor
// undefined.
func (d *Decoder) wire(id typeID) *wireType {
	if id >= firstUserID {
		return d.types[id]
	}
	return builtinTypes()[id]
}

func (d *Decoder) plan(id typeID, st *structType, t reflect.Type) ([]int, error) {
	key := planKey{id, t}
	if p, ok := d.plans[key]; ok {
		return p, nil
	}
	p := make([]int, len(st.Field))
	matched := false
	for i, wf := range st.Field {
		p[i] = -1
		if f, ok := t.FieldByName(wf.Name); ok && len(f.Index) == 1 && f.IsExported() {
			p[i], matched = f.Index[0], true
		}
	}
	// gob's rule: a struct with fields cannot be decoded into one with
	// fields when no name matches (wrong type, not a newer version).
	if !matched && len(st.Field) > 0 && t.NumField() > 0 {
		return nil, fmt.Errorf("gob: type mismatch: no fields of %s match %s", st.CommonType.Name, t)
	}
	d.plans[key] = p
	return p, nil
}
