package macvlan_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/macvlan"
)

// BenchmarkAddCheckDel measures one ADD, CHECK and DEL of a macvlan on a
// veth master (in-process, IPAM through the built host-local), in
// throwaway namespaces. Run after ./build_linux.sh:
//
//	go test -run '^$' -bench AddCheckDel ./plugins/main/macvlan/
func BenchmarkAddCheckDel(b *testing.B) {
	hostNS, peerNS, contNS := testutil.TBNS(b), testutil.TBNS(b), testutil.TBNS(b)
	if err := testutil.ConnectNS(testutil.VethEnd{NS: hostNS, Name: "master0"}, testutil.VethEnd{NS: peerNS, Name: "peer0"}); err != nil {
		b.Fatal(err)
	}
	stdin := []byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "bench", "type": "macvlan", "master": "master0",
		"ipam": {"type": "host-local", "subnet": "10.41.0.0/16", "dataDir": %q}}`, b.TempDir()))
	call := testutil.Call{ContainerID: "bench", Netns: contNS.Path(), IfName: "eth0"}
	var ns [3]int64
	for b.Loop() {
		var added []byte
		for i, cmd := range []string{"ADD", "CHECK", "DEL"} {
			call.Command, call.Stdin = cmd, stdin
			if cmd == "CHECK" {
				call.Stdin = withPrev(stdin, added)
			}
			start := time.Now()
			out, err := testutil.RunInErr(hostNS, macvlan.Plugin, call)
			added = out.Stdout
			if err != nil {
				b.Fatalf("%s: %v", cmd, err)
			}
			ns[i] += time.Since(start).Nanoseconds()
		}
	}
	for i, op := range []string{"ADD", "CHECK", "DEL"} {
		b.ReportMetric(float64(ns[i])/float64(b.N)/1e6, "ms/"+op)
	}
}

// withPrev adds prev as prevResult to conf (outside Ginkgo).
func withPrev(conf, prev []byte) []byte {
	return append(append(append([]byte{}, conf[:len(conf)-1]...), []byte(`, "prevResult": `)...), append(prev, '}')...)
}
