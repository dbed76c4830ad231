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
// The plugins that take no addresses from an IPAM plugin link no IPAM
// delegation (pkg/ipam, its prestart, cni's invoke, os/exec): the plugins
// that delegate inject it (attach.Plugin.IPAM). And the light plugins link
// at most maxDeps packages in all. And cniforge links no DHCP client.
func TestLinks(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list packages with")
	}
	const mod = "github.com/cniforge/plugins/"
	counted := map[string]bool{}
	for _, tc := range []struct {
		pkgs      []string
		forbidden []string
	}{
		{[]string{"scripts/startbench"}, []string{"github.com/onsi/", mod + "pkg/testutil"}},
		{
			[]string{"cmd/loopback", "cmd/tuning", "cmd/bandwidth", "cmd/sbr", "cmd/vrf", "cmd/dummy", "cmd/macvlan",
				"cmd/ipvlan", "cmd/vlan", "cmd/host-device", "cmd/tap", "cmd/host-local", "cmd/static", "cmd/dhcp", "cmd/cniforge-light", "cmd/cniforge-dhcp"},
			[]string{mod + "pkg/netfilter", "github.com/google/nftables", "github.com/mdlayher/netlink"},
		},
		{
			[]string{"cmd/loopback", "cmd/tuning", "cmd/bandwidth", "cmd/sbr", "cmd/vrf", "cmd/static", "cmd/cniforge-light"},
			[]string{mod + "pkg/ipam", mod + "pkg/prestart", "github.com/containernetworking/cni/pkg/invoke", "os/exec",
				"github.com/j-keck/arping", "math/rand"},
		},
		// Upstream's loopback links no crypto either; crypto/rand alone
		// is about 30 packages to load and initialise at every start.
		// cniforge install links loopback to cniforge-light.
		{[]string{"cmd/loopback", "cmd/cniforge-light"}, []string{"crypto/"}},
		// dhcp's client stack is cniforge-dhcp's alone: in cniforge its
		// inits and size made every other plugin's exec about 5 % costlier.
		{[]string{"cmd/cniforge", "cmd/cniforge-light"}, []string{mod + "plugins/ipam/dhcp", "github.com/insomniacslk/",
			"github.com/u-root/", "github.com/pierrec/lz4"}},
	} {
		for _, p := range tc.pkgs {
			out, err := exec.Command(goBin, "list", "-deps", mod+p).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", p, err)
			}
			deps := strings.Fields(string(out))
			if max, ok := maxDeps[p]; ok && len(deps) > max && !counted[p] {
				counted[p] = true
				t.Errorf("%s links %d packages, more than %d:\n%s", p, len(deps), max, out)
			}
			for _, dep := range deps {
				for _, f := range tc.forbidden {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s links %s", p, dep)
					}
				}
			}
		}
	}
}

// maxDeps is the line `go list -deps ./cmd/<plugin> | wc -l` holds for the
// light plugins (issue 30). Upstream v1.9.1's loopback links 104: the same
// 99 of the standard library, the CNI library and netlink, and 5 of its
// own. Ours adds the frame's packages (pkg/attach, plugin, ns, result, ip,
// owner, rollback, filelock) and what they use of the standard library
// (log/slog, 3 packages; runtime/debug, for the module version when built
// without -X): 113. cniforge-light, which the light plugins run as once
// installed, holds the five of them. (Upstream: tuning 104, sbr 105, vrf 104, bandwidth
// 145, static 97.)
var maxDeps = map[string]int{
	"cmd/loopback":  113,
	"cmd/tuning":    114,
	"cmd/sbr":       113,
	"cmd/vrf":       113,
	"cmd/bandwidth": 141,
	"cmd/static":    109,
	// What cniforge install links the light plugins to: the union of the
	// five above (117) and its main and plugins/light.
	"cmd/cniforge-light": 119,
}
