package bridge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/bridge"
)

// BenchmarkAddDel measures one ADD and one DEL (in-process, IPAM through the
// built host-local) with ipMasq on each backend and without it, in throwaway namespaces.
// Run after ./build_linux.sh:
//
//	go test -run '^$' -bench AddDel ./plugins/main/bridge/
func BenchmarkAddDel(b *testing.B) {
	for _, backend := range []string{"iptables", "nftables", "none"} {
		b.Run(backend, func(b *testing.B) {
			masq := fmt.Sprintf(`"ipMasq": true, "ipMasqBackend": %q`, backend)
			if backend == "none" {
				masq = `"ipMasq": false`
			}
			hostNS, contNS := testutil.TBNS(b), testutil.TBNS(b)
			stdin := []byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "bench", "type": "bridge", "bridge": "cnibr0",
				"isGateway": true, %s,
				"ipam": {"type": "host-local", "subnet": "10.40.0.0/16", "dataDir": %q}}`, masq, b.TempDir()))
			call := testutil.Call{ContainerID: "bench", Netns: contNS.Path(), IfName: "eth0", Stdin: stdin}
			var addNs, delNs int64
			for b.Loop() {
				for _, cmd := range []string{"ADD", "DEL"} {
					call.Command = cmd
					start := nowNanos()
					_, err := testutil.RunInErr(hostNS, bridge.Plugin, call)
					if err != nil {
						b.Fatalf("%s: %v", cmd, err)
					}
					if cmd == "ADD" {
						addNs += nowNanos() - start
					} else {
						delNs += nowNanos() - start
					}
				}
			}
			b.ReportMetric(float64(addNs)/float64(b.N)/1e6, "ms/ADD")
			b.ReportMetric(float64(delNs)/float64(b.N)/1e6, "ms/DEL")
		})
	}
}

func nowNanos() int64 { return time.Now().UnixNano() }
