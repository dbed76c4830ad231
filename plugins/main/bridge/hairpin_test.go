package bridge_test

import (
	"fmt"
	"os/exec"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/bridge"
)

// A container reaching itself through a service address: the host DNATs
// the service address to the container. With br_netfilter on (as on every
// Kubernetes node), that DNAT happens while the frame is being bridged, so
// the frame must leave through the port it came in by, which the bridge
// allows only on a port in hairpin mode. The host also masquerades the
// hairpinned packet, as kube-proxy does: a packet from the container's own
// address arriving at the container would be dropped as a martian.
//
// Without br_netfilter the kernel never shows a bridged frame to iptables:
// the specs need it (kernelfeature.BrNetfilter) and run in the VM lane,
// whose guest preloads it, when the host lacks it.
var _ = Describe("hairpin traffic", Label(kernelfeature.Label), func() {
	const service = "10.200.0.1"
	BeforeEach(func() { kernelfeature.Require(kernelfeature.BrNetfilter) })
	env := testutil.UseAttachEnv(bridge.Plugin, "eth0")

	// addWithService attaches the container and makes the host DNAT the
	// service address to it (and masquerade the hairpinned packet); it
	// returns the container's address.
	addWithService := func(hairpin string) string {
		GinkgoHelper()
		stdin := netConf("1.1.0", `"isDefaultGateway": true, "hairpinMode": `+hairpin, hostLocal(env.DataDir, "10.23.0.0/24"))
		res := mustAdd(env.HostNS, testutil.Call{ContainerID: "hp", Netns: env.ContNS.Path(), IfName: "eth0", Stdin: stdin})
		contIP := res.IPs[0].Address.IP.String()
		Expect(env.HostNS.Do(func() error {
			if err := ip.SetSysctl("net/bridge/bridge-nf-call-iptables", "1"); err != nil {
				return err
			}
			for _, rule := range [][]string{
				{"PREROUTING", "-d", service + "/32", "-p", "udp", "-j", "DNAT", "--to-destination", contIP},
				{"POSTROUTING", "-s", contIP + "/32", "-d", contIP + "/32", "-j", "MASQUERADE"},
			} {
				args := append([]string{"-w", "-t", "nat", "-A"}, rule...)
				if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
					return fmt.Errorf("iptables %v: %w: %s", args, err, out)
				}
			}
			return nil
		})).To(Succeed())
		return contIP
	}

	It("lets a container reach itself through the host with hairpinMode", func() {
		contIP := addWithService("true")
		src, err := testutil.UDPDeliver(env.ContNS, env.ContNS, contIP, service, 10*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(src).To(Equal("10.23.0.1"), "masqueraded to the bridge's gateway address")
	})

	It("drops that traffic without hairpinMode (what hairpinMode is for)", func() {
		contIP := addWithService("false")
		_, err := testutil.UDPDeliver(env.ContNS, env.ContNS, contIP, service, 2*time.Second)
		Expect(err).To(MatchError(ContainSubstring("i/o timeout")))
	})
})
