// Package gobrpc speaks Go's net/rpc protocol over HTTP CONNECT, with its
// gob encoding, without linking net/rpc, net/http or encoding/gob: a
// client (Client), a server (Server) and the gob subset they need
// (Encoder, Decoder).
//
// Why not the standard library: cmd/cniforge links every plugin into one
// binary, and net/rpc alone drags in net/http, crypto/tls, html/template,
// compress/... whose package init every plugin exec pays (3-4 ms and some
// 100 page faults more per exec, measured). Only dhcp needs the protocol,
// because upstream's dhcp plugin and daemon speak it, and we must talk to
// both.
//
// The wire format is the one specified in encoding/gob's doc.go: a stream
// of messages, each a uint byte count followed by either a type definition
// (negative type id, then a wireType) or a value (type id, then the value).
// Integers: an unsigned value below 128 is one byte; a larger one is the
// negated byte count followed by the big-endian bytes. A signed value is
// shifted left one bit, complemented and flagged in bit 0 when negative.
// A struct is a list of (field number delta, value) pairs ended by delta
// 0; zero fields are left out; pointers are flattened (a nil pointer is
// left out, like a zero value). A value that is not a struct travels as a
// struct of one field (delta 0, then the value).
//
// The subset: bool, signed and unsigned integers, string, []byte (and
// named byte slices such as net.IP), slices, structs and pointers to any
// of them. Maps, interfaces, floats, arrays, channels, funcs and types
// with their own GobEncode/MarshalBinary are refused with an error. The
// decoder skips any field the peer sends that the target lacks (of any gob
// type but interface) and leaves fields the peer omits untouched, as gob
// does. It reads bytes from a socket: every length is checked against the
// message, messages and type definitions are bounded, nesting is bounded,
// and it returns errors rather than panicking.
package gobrpc

import (
	"errors"
	"io"
	"reflect"
	"sync"
)

type typeID int64

// The ids gob predefines (encoding/gob/type.go). A stream's own types get
// ids from firstUserID up.
const (
	tBool      typeID = 1
	tInt       typeID = 2
	tUint      typeID = 3
	tFloat     typeID = 4
	tBytes     typeID = 5
	tString    typeID = 6
	tComplex   typeID = 7
	tInterface typeID = 8
	// 9-15 are reserved; 16-23 describe types (wireType and its parts),
	// which travel in definitions only, never as values.
	tWireType   typeID = 16
	firstUserID typeID = 64
)

// Bounds on what a peer can make the decoder hold.
const (
	// MaxMessage bounds one gob message (gob's own bound is 1 GiB). The
	// largest value dhcp sends is a netconf in skel.CmdArgs.StdinData.
	MaxMessage = 4 << 20
	// maxTypeBytes bounds the sum of a stream's type definitions; a real
	// stream defines a handful of types in a few hundred bytes.
	maxTypeBytes = 64 << 10
	// maxDepth bounds nesting: gob types can be recursive.
	maxDepth = 100
)

// The types below mirror encoding/gob's type descriptions field for
// field: a definition is a wireType value, encoded like any struct.
type wireType struct {
	ArrayT           *arrayType
	SliceT           *sliceType
	StructT          *structType
	MapT             *mapType
	GobEncoderT      *gobEncoderType
	BinaryMarshalerT *gobEncoderType
	TextMarshalerT   *gobEncoderType
}

// CommonType is embedded in gob's types, which makes it a field named
// CommonType on the wire.
type CommonType struct {
	Name string
	Id   typeID
}

type arrayType struct {
	CommonType CommonType
	Elem       typeID
	Len        int
}

type sliceType struct {
	CommonType CommonType
	Elem       typeID
}

type structType struct {
	CommonType CommonType
	Field      []fieldType
}

type fieldType struct {
	Name string
	Id   typeID
}

type mapType struct {
	CommonType CommonType
	Key        typeID
	Elem       typeID
}

type gobEncoderType struct {
	CommonType CommonType
}

func (w *wireType) name() string {
	switch {
	case w.ArrayT != nil:
		return w.ArrayT.CommonType.Name
	case w.SliceT != nil:
		return w.SliceT.CommonType.Name
	case w.StructT != nil:
		return w.StructT.CommonType.Name
	case w.MapT != nil:
		return w.MapT.CommonType.Name
	}
	return "?"
}

// basicNames is an array, not a map: constant data, nothing built at init.
var basicNames = [...]string{tBool: "bool", tInt: "int", tUint: "uint", tFloat: "float",
	tBytes: "bytes", tString: "string", tComplex: "complex", tInterface: "interface"}

// basicName is the name of a predefined type id, "" for any other id.
func basicName(id typeID) string {
	if id < 0 || id >= typeID(len(basicNames)) {
		return ""
	}
	return basicNames[id]
}

// builtinTypes are the definitions of wireType and its parts, with ids
// from tWireType up, so that the decoder reads a definition as it reads
// any struct. Built on first use, not at init: every plugin exec of the
// multicall binary would pay for it.
var builtinTypes = sync.OnceValue(func() map[typeID]*wireType {
	e := &Encoder{ids: map[reflect.Type]typeID{}, next: tWireType}
	if _, err := e.typeID(reflect.TypeFor[wireType]()); err != nil {
		panic(err) // a bug in this file, not input
	}
	defs := map[typeID]*wireType{}
	for _, d := range e.pending {
		defs[d.id] = d.wire
	}
	return defs
})

// Uint and int encodings (gob doc: "Encoding details").

func appendUint(b []byte, x uint64) []byte {
	if x < 0x80 {
		return append(b, byte(x))
	}
	n := 0
	for y := x; y != 0; y >>= 8 {
		n++
	}
	b = append(b, byte(-n))
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(x>>(8*i)))
	}
	return b
}

func appendInt(b []byte, i int64) []byte {
	var u uint64
	if i < 0 {
		u = uint64(^i<<1) | 1
	} else {
		u = uint64(i << 1)
	}
	return appendUint(b, u)
}

func intFromUint(u uint64) int64 {
	if u&1 != 0 {
		return ^int64(u >> 1)
	}
	return int64(u >> 1)
}

var errRange = errors.New("gob: encoded unsigned integer out of range")

// readUint reads a gob uint. The stream ending before its first byte is
// io.EOF; inside it, io.ErrUnexpectedEOF.
func readUint(r io.ByteReader) (uint64, error) {
	b, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	if b < 0x80 {
		return uint64(b), nil
	}
	n := -int(int8(b))
	if n > 8 {
		return 0, errRange
	}
	var x uint64
	for range n {
		c, err := r.ReadByte()
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return 0, err
		}
		x = x<<8 | uint64(c)
	}
	return x, nil
}
