package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinks checks what start cost depends on: the tool links no test code
// (its -h would print Ginkgo's flags), and the plugins that keep no rules
// link no netfilter code (issue 30): pkg/attach, which every plugin links,
// reaches masquerade only through pkg/attach/masquerade, which bridge and
// ptp import. And loopback links no crypto (pkg/ip's random veth names).
func TestLinks(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list packages with")
	}
	const mod = "github.com/cniforge/plugins/"
	for _, tc := range []struct {
		pkgs      []string
		forbidden []string
	}{
		{[]string{"scripts/startbench"}, []string{"github.com/onsi/", mod + "pkg/testutil"}},
		{
			[]string{"cmd/loopback", "cmd/tuning", "cmd/bandwidth", "cmd/sbr", "cmd/vrf", "cmd/dummy", "cmd/macvlan",
				"cmd/ipvlan", "cmd/vlan", "cmd/host-device", "cmd/tap", "cmd/host-local", "cmd/static", "cmd/dhcp"},
			[]string{mod + "pkg/netfilter", "github.com/google/nftables", "github.com/mdlayher/netlink"},
		},
		// Upstream's loopback links no crypto either; crypto/rand alone
		// is about 30 packages to load and initialise at every start.
		{[]string{"cmd/loopback"}, []string{"crypto/"}},
	} {
		for _, p := range tc.pkgs {
			out, err := exec.Command(goBin, "list", "-deps", mod+p).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", p, err)
			}
			for _, dep := range strings.Fields(string(out)) {
				for _, f := range tc.forbidden {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s links %s", p, dep)
					}
				}
			}
		}
	}
}
