package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// orphanNode is a node whose network chains every plugin that keeps host
// state by owner: bridge (masquerade), portmap (host ports, on backend),
// firewall (iptables) and bandwidth (an ifb for egress shaping).
func orphanNode(t *testing.T, backend string) *node {
	n := newNode(t)
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"nodenet","plugins":[
		{"type":"bridge","bridge":"cnode0","isGateway":true,"ipMasq":true,"ipMasqBackend":%[2]q,
		 "ipam":{"type":"host-local","dataDir":%[1]q,"ranges":[[{"subnet":"10.123.0.0/24"}]]}},
		{"type":"portmap","backend":%[2]q,"capabilities":{"portMappings":true}},
		{"type":"firewall","backend":"iptables"},
		{"type":"bandwidth","ingressRate":8000000,"ingressBurst":80000,"egressRate":8000000,"egressBurst":80000}]}`,
		n.ipamData, backend)
	n.setConf(conf)
	return n
}

// rules is every netfilter rule of the node's host netns, as iptables-save
// (both families) and nft print them.
func (n *node) rules() string {
	n.t.Helper()
	var b strings.Builder
	must(n.t, n.hostNS.Do(func() error {
		for _, argv := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"}} {
			out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %w: %s", argv, err, out)
			}
			b.Write(out)
		}
		return nil
	}))
	return b.String()
}

// A pod whose netns and cache entry are both gone leaves a reservation no
// attachment owns. gc releases it with a DEL that can carry no capability
// arguments and no prevResult (nothing recorded them), so each plugin must
// find its host state by owner: the pod's DNAT chain and its entry in the
// shared host-port chain (else the next pod given the address receives
// the dead pod's host port), its firewall rules, its ifb, its masquerade.
func TestGCOrphanTeardownRemovesEveryPluginsState(t *testing.T) {
	for _, backend := range []string{"iptables", "nftables"} {
		t.Run(backend, func(t *testing.T) {
			n := orphanNode(t, backend)
			live, _ := testutil.NewTestNS(t)
			lost, rm := testutil.NewTestNS(t)
			n.addMapped("ctr-live", live.Path(), 18081)
			n.addMapped("ctr-lost", lost.Path(), 18080)
			var ipLost string
			for _, a := range n.ls().Attachments {
				if a.ContainerID == "ctr-lost" {
					ipLost, _, _ = strings.Cut(a.IPs[0], "/")
				}
			}
			before := n.rules()
			for _, s := range []string{"ctr-lost", "18080", ipLost} {
				if !strings.Contains(before, s) {
					t.Fatalf("no rule names %s after ADD; the test cannot see the rules:\n%s", s, before)
				}
			}
			if ifbs(n.links()) != 2 {
				t.Fatalf("want two bwp ifbs after two ADDs: %v", n.links())
			}

			// Behind the runtime's back: the netns and the cache entry go.
			must(t, rm())
			must(t, os.Remove(filepath.Join(n.cache, "results", "nodenet-ctr-lost-eth0")))
			n.age(ipLost)
			// The kernel destroys a removed namespace (and the host end of
			// its veth) asynchronously: lo, cnode0, the live veth, two ifbs.
			n.waitLinks(5)
			out, rc := n.cli("gc", "--apply")
			t.Logf("cniforge gc --apply:\n%s", out)
			if rc != 0 || !strings.Contains(out, "nodenet: DEL ctr-lost eth0 (releases unowned reservation(s) "+ipLost) {
				t.Fatalf("gc --apply: exit %d:\n%s", rc, out)
			}
			if st := n.ls(); len(st.Orphans) != 0 || st.Networks[0].Used != 1 {
				t.Errorf("after gc --apply: %+v", st)
			}
			after := n.rules()
			for _, s := range []string{"ctr-lost", "18080", ipLost} {
				if strings.Contains(after, s) {
					t.Errorf("gc left a rule naming %s:\n%s", s, after)
				}
			}
			if links := n.links(); ifbs(links) != 1 {
				t.Errorf("want only the live pod's ifb after gc: %v", links)
			}
			for _, s := range []string{"ctr-live", "18081"} {
				if !strings.Contains(after, s) {
					t.Errorf("gc removed the live pod's rule naming %s:\n%s", s, after)
				}
			}
		})
	}
}

func ifbs(links []string) (n int) {
	for _, l := range links {
		if strings.HasPrefix(l, "bwp") {
			n++
		}
	}
	return n
}
