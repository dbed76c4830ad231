package hostport

// Helpers of the specs of Setup over a live attachment (iptundo_test.go,
// nftundo_test.go).

import (
	"errors"
	"net"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

var errInjected = errors.New("injected")

// liveOpts is a dual-stack attachment with three mappings, one of them UDP.
func liveOpts() PortMapOptions {
	return PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: "live"}, SNAT: true, MarkMasqBit: DefaultMarkMasqBit,
		Mappings: []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}, {HostPort: 8443, ContainerPort: 443, Protocol: "tcp"},
			{HostPort: 5353, ContainerPort: 53, Protocol: "udp"}},
		ContainerIPs: []net.IPNet{{IP: net.ParseIP("10.1.0.5"), Mask: net.CIDRMask(24, 32)}, {IP: net.ParseIP("fd00:1::5"), Mask: net.CIDRMask(64, 128)}}}
}

var counterRE = regexp.MustCompile(`\[\d+:\d+\]|counter packets \d+ bytes \d+`)

// stableDump is cmds' output in n without comment lines and counters.
func stableDump(n *ns.NetNS, cmds ...[]string) string {
	GinkgoHelper()
	var b strings.Builder
	for _, cmd := range cmds {
		for _, l := range strings.Split(testutil.NetfilterOutput(n, cmd...), "\n") {
			if !strings.HasPrefix(l, "#") {
				b.WriteString(counterRE.ReplaceAllString(l, "") + "\n")
			}
		}
	}
	return b.String()
}
