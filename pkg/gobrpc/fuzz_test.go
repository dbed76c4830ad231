package gobrpc

import (
	"bytes"
	"encoding/gob"
	"errors"
	"io"
	"net/rpc"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// The two streams of a net/rpc connection, as the standard library writes
// them: the client's (headers and skel arguments) and the server's
// (headers, results, and an error with its empty body). calls is the
// number of client calls.
func stdStreams(t testing.TB, calls int) (client, server []byte) {
	var c, s bytes.Buffer
	ce, se := gob.NewEncoder(&c), gob.NewEncoder(&s)
	for seq, m := range []string{"DHCP.Allocate", "DHCP.Release", "DHCP.Check"}[:calls] {
		for _, v := range []any{&rpc.Request{ServiceMethod: m, Seq: uint64(seq)}, fullArgs()} {
			if err := ce.Encode(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, v := range []any{
		&rpc.Response{ServiceMethod: "DHCP.Allocate", Seq: 0}, fullResult(),
		&rpc.Response{ServiceMethod: "DHCP.Release", Seq: 1}, &struct{}{},
		&rpc.Response{ServiceMethod: "DHCP.Check", Seq: 2, Error: "daemon holds no lease"}, struct{}{},
	} {
		if err := se.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return c.Bytes(), s.Bytes()
}

// FuzzGobDecode feeds the decoder arbitrary bytes as the server reads
// them (first byte even: request headers and skel arguments) or as the
// client does (odd: response headers and results). Any error is fine; a
// panic, a hang or a runaway allocation is not.
func FuzzGobDecode(f *testing.F) {
	// One call each way: go's fuzzer minimizes every new input it finds,
	// which takes the longer the larger the seeds.
	client, server := stdStreams(f, 1)
	f.Add(append([]byte{0}, client...))
	f.Add(append([]byte{1}, server...))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		targets := []func() any{
			func() any { return new(request) }, func() any { return new(skel.CmdArgs) },
		}
		if data[0]%2 == 1 {
			targets = []func() any{
				func() any { return new(response) }, func() any { return new(current.Result) },
				func() any { return new(response) }, func() any { return nil },
			}
		}
		dec := NewDecoder(bytes.NewReader(data[1:]))
		// Every Decode consumes at least one byte; a value error leaves
		// the stream readable, a read error ends it.
		for i := 0; i <= len(data); i++ {
			err := dec.Decode(targets[i%len(targets)]())
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return
			}
		}
	})
}

// The seeds decode as they should: the fuzz target starts from streams
// the decoder understands, not from errors.
func TestStdStreamsDecode(t *testing.T) {
	client, server := stdStreams(t, 3)
	dec := NewDecoder(bytes.NewReader(client))
	for seq := range 3 {
		var req request
		args := new(skel.CmdArgs)
		if err := dec.Decode(&req); err != nil || req.Seq != uint64(seq) {
			t.Fatalf("request %d: %+v %v", seq, req, err)
		}
		if err := dec.Decode(args); err != nil || args.ContainerID != "ctr1" {
			t.Fatalf("args %d: %+v %v", seq, args, err)
		}
	}
	dec = NewDecoder(bytes.NewReader(server))
	var resp response
	res := new(current.Result)
	for i, v := range []any{&resp, res, &resp, &struct{}{}, &resp, nil} {
		if err := dec.Decode(v); err != nil {
			t.Fatalf("server value %d: %v", i, err)
		}
	}
	if resp.Error != "daemon holds no lease" || len(res.Routes) != 2 {
		t.Fatalf("decoded %+v, %+v", resp, res)
	}
}
