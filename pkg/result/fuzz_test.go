package result_test

import (
	"encoding/json"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
)

// FuzzPrevResult: any config's prevResult parses (PrevResult: every
// version, converted to the current one) without a panic or a hang, the
// same way twice, or fails with a CNI error; a result that parses prints
// (as a plugin passes it on) and parses back to the same result.
func FuzzPrevResult(f *testing.F) {
	f.Add([]byte(`{"cniVersion": "1.1.0", "name": "n", "type": "tuning", "prevResult": {"cniVersion": "1.1.0",
		"interfaces": [{"name": "eth0", "mac": "02:00:00:00:00:01", "sandbox": "/var/run/netns/x"}],
		"ips": [{"address": "10.1.0.5/24", "gateway": "10.1.0.1", "interface": 0}],
		"routes": [{"dst": "0.0.0.0/0", "gw": "10.1.0.1"}], "dns": {"nameservers": ["10.1.0.53"]}}}`))
	f.Add([]byte(`{"cniVersion": "0.2.0", "name": "n", "prevResult": {"cniVersion": "0.2.0",
		"ip4": {"ip": "10.1.0.5/24", "gateway": "10.1.0.1", "routes": [{"dst": "0.0.0.0/0"}]}, "ip6": {"ip": "fd00::5/64"}}}`))
	f.Add([]byte(`{"cniVersion": "0.3.1", "name": "n", "prevResult": {"cniVersion": "0.3.1",
		"ips": [{"version": "4", "address": "10.1.0.5/24", "interface": 0}]}}`))
	f.Fuzz(func(t *testing.T, stdin []byte) {
		var prev, again *current.Result
		var err1, err2 error
		testutil.Bounded(t, "PrevResult", func() { prev, err1 = result.PrevResult(stdin) })
		testutil.CheckCNIError(t, "PrevResult", err1)
		testutil.Bounded(t, "PrevResult again", func() { again, err2 = result.PrevResult(stdin) })
		testutil.CheckSame(t, prev, err1, again, err2)
		if err1 != nil || prev == nil {
			return
		}
		// A plugin passes prevResult on in its own config's version: print
		// it in the current one and parse it back as the next plugin would.
		var out []byte
		testutil.Bounded(t, "print", func() { out, err1 = json.Marshal(prev) })
		if err1 != nil {
			t.Fatalf("a parsed prevResult does not print: %v", err1)
		}
		conf, _ := json.Marshal(map[string]any{"cniVersion": prev.CNIVersion, "name": "n", "prevResult": json.RawMessage(out)})
		back, err := result.PrevResult(conf)
		if err != nil {
			t.Fatalf("a printed prevResult does not parse back: %v\n%s", err, out)
		}
		// Compared as printed: an empty list and none print alike.
		if again, _ := json.Marshal(back); string(again) != string(out) {
			t.Fatalf("prevResult round trip differs:\n%s\n%s", out, again)
		}
	})
}

// FuzzGCAttachments: any GC config's list of valid attachments parses
// without a panic or a hang, the same way twice, or fails with a CNI
// error; every entry it returns has a container ID and an ifname.
func FuzzGCAttachments(f *testing.F) {
	f.Add([]byte(`{"cniVersion": "1.1.0", "name": "n", "cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "eth0"}]}`))
	f.Add([]byte(`{"cniVersion": "1.1.0", "name": "n", "cni.dev/attachments": [{"containerID": "c1", "ifname": "eth0"}, null]}`))
	f.Add([]byte(`{"cniVersion": "1.1.0", "name": "n", "cni.dev/valid-attachments": null}`))
	f.Fuzz(func(t *testing.T, stdin []byte) {
		testutil.FuzzOnce(t, func() (any, error) {
			list, err := result.GCAttachments(stdin)
			for i, a := range list {
				if a.ContainerID == "" || a.IfName == "" {
					t.Fatalf("entry %d accepted without containerID or ifname: %#v", i, a)
				}
			}
			return list, err
		})
	})
}
