package gobrpc

import (
	"bytes"
	"encoding/gob"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

func intp(i int) *int { return &i }

func cidr(s string) net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return *n
}

// fullResult sets every field a dhcp result can carry, including pointers
// to zero (gob sends those as nil) and to non-zero.
func fullResult() *current.Result {
	return &current.Result{
		CNIVersion: "1.1.0",
		Interfaces: []*current.Interface{
			{Name: "eth0", Mac: "0a:58:0a:01:00:05", Mtu: 1450, Sandbox: "/run/netns/x"},
			{Name: "vhost0", Mac: "0a:58:0a:01:00:06", SocketPath: "/run/vhost.sock", PciID: "0000:00:1f.0"},
		},
		IPs: []*current.IPConfig{
			{Interface: intp(0), Address: cidr("10.1.0.5/24"), Gateway: net.ParseIP("10.1.0.1")},
			{Interface: intp(1), Address: cidr("2001:db8::5/64"), Gateway: net.ParseIP("2001:db8::1")},
			{Address: cidr("192.168.9.9/32")},
		},
		Routes: []*types.Route{
			{Dst: cidr("0.0.0.0/0"), GW: net.ParseIP("10.1.0.1"), MTU: 1400, AdvMSS: 1360, Priority: 100,
				Table: intp(254), Scope: intp(0)},
			{Dst: cidr("10.9.0.0/16"), Table: intp(-3), Scope: intp(253)},
		},
		DNS: types.DNS{Nameservers: []string{"10.1.0.1", "2001:db8::53"}, Domain: "example.org",
			Search: []string{"a.example.org", "b.example.org"}, Options: []string{"ndots:5", ""}},
	}
}

func fullArgs() *skel.CmdArgs {
	return &skel.CmdArgs{ContainerID: "ctr1", Netns: "/run/netns/ctr1", IfName: "eth0",
		Args: "K8S_POD_NAME=x;IgnoreUnknown=1", Path: "/opt/cni/bin:/usr/libexec/cni", NetnsOverride: "1",
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"dhcpnet","type":"dhcp","ipam":{"type":"dhcp"}}` + "\x00\xff")}
}

type sample struct {
	Small   int8
	Neg     int64
	Big     uint64
	Flag    bool
	Names   []string
	Nested  [][]int
	Ptrs    []*current.Interface
	Deep    **string
	Empty   struct{}
	private int //nolint:unused // must not travel
}

// values is what both directions send, in one stream (types repeat, so
// the second Result uses the definitions the first sent).
func values() []any {
	s := "deep"
	ps := &s
	return []any{
		fullResult(), fullArgs(), fullResult(), &struct{}{}, 42, -7, "top", []string{"x", ""},
		&sample{Small: -128, Neg: -1 << 62, Big: 1<<64 - 1, Flag: true, Names: []string{"", "b"},
			Nested: [][]int{{}, {0, -1, 1 << 40}}, Ptrs: []*current.Interface{{}, {Name: "x"}}, Deep: &ps},
		&current.Result{}, &skel.CmdArgs{},
	}
}

// fresh returns a new zero value to decode v's kind of value into.
func fresh(v any) any {
	return reflect.New(reflect.TypeOf(v).Elem()).Interface()
}

func ptrTo(v any) any {
	if reflect.TypeOf(v).Kind() == reflect.Pointer {
		return v
	}
	p := reflect.New(reflect.TypeOf(v))
	p.Elem().Set(reflect.ValueOf(v))
	return p.Interface()
}

// viaGob is what gob itself makes of vs: the reference.
func viaGob(t *testing.T, vs []any) []any {
	t.Helper()
	var buf bytes.Buffer
	enc, dec := gob.NewEncoder(&buf), gob.NewDecoder(&buf)
	var out []any
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			t.Fatalf("gob encode %T: %v", v, err)
		}
		got := fresh(ptrTo(v))
		if err := dec.Decode(got); err != nil {
			t.Fatalf("gob decode %T: %v", v, err)
		}
		out = append(out, got)
	}
	return out
}

type (
	encoder interface{ Encode(any) error }
	decoder interface{ Decode(any) error }
)

// crossCodec encodes values() with newEnc's encoder and decodes them with
// newDec's decoder, comparing each decoded value with gob's own round
// trip; it returns that reference and the decoder, past the values.
func crossCodec(t *testing.T, newEnc func(io.Writer) encoder, newDec func(io.Reader) decoder) (want []any, dec decoder) {
	t.Helper()
	vs := values()
	want = viaGob(t, vs)
	var buf bytes.Buffer
	enc := newEnc(&buf)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			t.Fatalf("encode %T: %v", v, err)
		}
	}
	dec = newDec(&buf)
	for i, v := range vs {
		got := fresh(ptrTo(v))
		if err := dec.Decode(got); err != nil {
			t.Fatalf("decode %T: %v", v, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("value %d (%T): decoded\n%#v\nwant (gob's own round trip)\n%#v", i, v, got, want[i])
		}
	}
	return want, dec
}

func TestOursEncodeGobDecodes(t *testing.T) {
	want, _ := crossCodec(t,
		func(w io.Writer) encoder { return NewEncoder(w) },
		func(r io.Reader) decoder { return gob.NewDecoder(r) })
	// The reference keeps what matters: a pointer to 1 stays, the
	// netconf's bytes stay.
	if r := want[0].(*current.Result); r.IPs[1].Interface == nil || *r.IPs[1].Interface != 1 || r.Routes[1].Table == nil {
		t.Fatalf("reference lost pointers: %+v", r.IPs[1])
	}
	if !bytes.Equal(want[1].(*skel.CmdArgs).StdinData, fullArgs().StdinData) {
		t.Fatal("reference lost StdinData")
	}
}

func TestGobEncodesOursDecodes(t *testing.T) {
	_, dec := crossCodec(t,
		func(w io.Writer) encoder { return gob.NewEncoder(w) },
		func(r io.Reader) decoder { return NewDecoder(r) })
	if err := dec.Decode(nil); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
}

// Newer and older versions of a type meet on the wire: unknown fields
// are skipped (whatever their gob type), missing ones stay as they are.
type newer struct {
	Name    string
	Extra   map[string][]int
	Ratio   float64
	Cplx    complex128
	Arr     [2]string
	Items   []*newer
	Ticket  time.Time // a GobEncoder
	Count   int
	Missing string
}

type older struct {
	Count int
	Name  string
	Kept  string
}

func TestSkipsUnknownFields(t *testing.T) {
	var buf bytes.Buffer
	in := newer{Name: "n", Extra: map[string][]int{"a": {1}}, Ratio: 0.5, Cplx: 1i, Arr: [2]string{"x", "y"},
		Items: []*newer{{Name: "inner", Ratio: 2}}, Ticket: time.Unix(1, 0), Count: 3}
	if err := gob.NewEncoder(&buf).Encode(in); err != nil {
		t.Fatal(err)
	}
	if err := gob.NewEncoder(&buf).Encode(in); err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(&buf)
	got := older{Kept: "untouched"}
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if want := (older{Count: 3, Name: "n", Kept: "untouched"}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// A second stream (a second gob encoder) in the same bytes redefines
	// the ids: our decoder refuses that as gob does; but skipping a whole
	// value works on a fresh decoder.
	if err := dec.Decode(nil); err == nil {
		t.Fatal("a redefined type id was accepted")
	}
}

func TestRefusals(t *testing.T) {
	for _, v := range []any{map[string]int{"a": 1}, 1.5, struct{ F float32 }{}, time.Now(), [2]int{},
		struct{ I any }{}, struct{ C chan int }{}, (*int)(nil), nil, []*int{nil}} {
		var buf bytes.Buffer
		if err := NewEncoder(&buf).Encode(v); err == nil {
			t.Errorf("encoded %T", v)
		} else if buf.Len() != 0 {
			t.Errorf("%T: refused (%v) but wrote %d bytes", v, err, buf.Len())
		}
	}
	// A refused type must not leave half its definitions marked sent.
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	type mixed struct {
		A []string
		B map[int]int
	}
	if err := enc.Encode(mixed{}); err == nil {
		t.Fatal("encoded a map field")
	}
	if err := enc.Encode([]string{"ok"}); err != nil {
		t.Fatal(err)
	}
	// Nor may a value that failed (a nil element) leave its definitions
	// marked sent.
	if err := enc.Encode([]*int{intp(1), nil}); err == nil {
		t.Fatal("encoded a nil element")
	}
	if err := enc.Encode([]*int{intp(2)}); err != nil {
		t.Fatal(err)
	}
	dec := gob.NewDecoder(&buf)
	var got []string
	if err := dec.Decode(&got); err != nil || len(got) != 1 {
		t.Fatalf("after a refusal: %v %v", got, err)
	}
	var ints []*int
	if err := dec.Decode(&ints); err != nil || len(ints) != 1 || *ints[0] != 2 {
		t.Fatalf("after a failed value: %v %v", ints, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	enc := func(v any) *bytes.Buffer {
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(v); err != nil {
			t.Fatal(err)
		}
		return &buf
	}
	cases := []struct {
		name string
		in   *bytes.Buffer
		into any
		want string
	}{
		{"overflow", enc(300), new(int8), "out of range"},
		{"string into int", enc("x"), new(int), "type mismatch"},
		{"int into uint", enc(-1), new(uint), "type mismatch"},
		{"no field matches", enc(struct{ A, B int }{1, 2}), &struct{ C int }{}, "no fields"},
		{"field of another type", enc(struct{ A string }{"x"}), &struct{ A int }{}, "type mismatch"},
		{"float into int", enc(1.5), new(int), "type mismatch"},
		{"interface field", enc(struct {
			I any
			J int
		}{1, 2}), new(struct{ J int }), "interface"},
		{"truncated", bytes.NewBuffer(enc(fullResult()).Bytes()[:40]), new(current.Result), "unexpected EOF"},
		{"huge message", bytes.NewBuffer(appendUint(nil, MaxMessage+1)), new(int), "message of"},
	}
	for _, c := range cases {
		err := NewDecoder(c.in).Decode(c.into)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if err := NewDecoder(enc(1)).Decode(3); err == nil {
		t.Error("decoded into a non-pointer")
	}
}

// A count or length larger than the message, a deep recursive type and
// an allocation far beyond the message's size are refused, not obeyed.
func TestHostileInput(t *testing.T) {
	msg := func(parts ...[]byte) []byte {
		b := bytes.Join(parts, nil)
		return append(appendUint(nil, uint64(len(b))), b...)
	}
	def := func(id typeID, w *wireType) []byte {
		b, err := appendStruct(appendInt(nil, -int64(id)), reflect.ValueOf(w).Elem())
		if err != nil {
			t.Fatal(err)
		}
		return msg(b)
	}
	ct := func(id typeID) CommonType { return CommonType{Name: "t", Id: id} }
	self := def(64, &wireType{SliceT: &sliceType{CommonType: ct(64), Elem: 64}})
	var deep []byte
	for range 200 {
		deep = appendUint(deep, 1) // each level: a slice of one element
	}
	deep = append(deep, 0)
	bigStruct := def(65, &wireType{StructT: &structType{CommonType: ct(65), Field: []fieldType{{Name: "Name", Id: tString}}}})
	bigSlice := def(66, &wireType{SliceT: &sliceType{CommonType: ct(66), Elem: 65}})
	many := bytes.Repeat([]byte{0}, 60000) // 60000 empty structs
	cases := []struct {
		name   string
		stream []byte
		into   any
		want   string
	}{
		{"string longer than message", msg(appendInt(nil, int64(tString)), []byte{0, 0x7f, 'a'}), new(string), "exceeds"},
		{"count larger than message", append(self, msg(appendInt(nil, 64), []byte{0, 0xfc, 0x10, 0, 0, 0})...), nil, "exceeds"},
		{"deep recursion", append(self, msg(appendInt(nil, 64), []byte{0}, deep)...), nil, "nested deeper"},
		{"undefined type", msg(appendInt(nil, 99), []byte{0, 1}), nil, "not defined"},
		{"reserved id", def(10, &wireType{}), nil, "reserved"},
		{"uint of 9 bytes", msg(appendInt(nil, int64(tUint)), []byte{0, 0xf7, 1, 2, 3, 4, 5, 6, 7, 8, 9}), new(uint64), "out of range"},
		{"field out of range", append(bigStruct, msg(appendInt(nil, 65), []byte{5, 0})...), nil, "out of range"},
		{"field one past the last", append(bigStruct, msg(appendInt(nil, 65), []byte{2, 0})...), new(struct{ Name string }), "out of range"},
		{"allocation", append(append(bigStruct, bigSlice...), msg(appendInt(nil, 66), []byte{0}, appendUint(nil, 60000), many)...),
			new([]*current.Interface), "too large"},
	}
	for _, c := range cases {
		err := NewDecoder(bytes.NewReader(c.stream)).Decode(c.into)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if !errors.Is(NewDecoder(bytes.NewReader(nil)).Decode(nil), io.EOF) {
		t.Error("empty stream is not io.EOF")
	}
}
