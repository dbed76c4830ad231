package nft

import (
	"io"
	"net"
	"strconv"
	"time"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// Issue 31, stage 3 (kube-proxy beside portmap): a hostPort equal to a
// Service's NodePort or externalIP must not capture the Service's
// traffic. kube-proxy's nftables mode puts its nat chains at dstnat, as
// iptables' nat table is; among nat chains of one priority the kernel
// runs the one registered last first, so a cni_hostport table made after
// kube-proxy's, at dstnat too, DNATs the Service's port to the hostPort
// pod. The connections below are real: a "Service backend" and a
// "hostPort pod" listen on the test netns's own address, and whoever
// answers says who it is.
var _ = Describe("nftables port forwards beside kube-proxy's nat chains", func() {
	const (
		addr      = "10.1.0.1"
		svcPort   = 8001 // the Service's backend
		podPort   = 8002 // the hostPort pod
		nodePort  = 30085
		otherPort = 30086 // a hostPort no Service has
	)
	// kube-proxy's nftables mode, reduced to a NodePort: its chains at
	// dstnat, in both hooks.
	kubeProxy := `table ip kube-proxy {
	chain nat-prerouting { type nat hook prerouting priority -100; tcp dport 30085 dnat to 10.1.0.1:8001; }
	chain nat-output { type nat hook output priority -100; tcp dport 30085 dnat to 10.1.0.1:8001; }
}`
	var hostNS *ns.NetNS

	// who dials addr:port in hostNS and returns what the listener that
	// accepted wrote: "service" or "pod".
	who := func(port int) string {
		GinkgoHelper()
		var got []byte
		Expect(hostNS.Do(func() error {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(port)), 5*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second)) // the read below fails on expiry
			got, err = io.ReadAll(c)
			return err
		})).To(Succeed())
		return string(got)
	}

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		Expect(hostNS.Do(func() error {
			lo, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(lo); err != nil {
				return err
			}
			// the node's address, on lo: local, as fib daddr type local wants
			a, _ := netlink.ParseAddr(addr + "/24")
			if err := netlink.AddrAdd(lo, a); err != nil {
				return err
			}
			for port, name := range map[int]string{svcPort: "service", podPort: "pod"} {
				l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
				if err != nil {
					return err
				}
				DeferCleanup(l.Close)
				go func() {
					for {
						c, err := l.Accept()
						if err != nil {
							return
						}
						_, _ = c.Write([]byte(name)) // the dialer reads it or fails
						_ = c.Close()                // best effort: the dialer has read to EOF
					}
				}()
			}
			return nil
		})).To(Succeed())
	})

	opts := hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: "hp"},
		ContainerIPs: []net.IPNet{{IP: net.ParseIP(addr)}}, SNAT: true, MarkMasqBit: hostport.DefaultMarkMasqBit,
		Mappings: []hostport.PortMapping{
			{HostPort: nodePort, ContainerPort: podPort, Protocol: "tcp"},
			{HostPort: otherPort, ContainerPort: podPort, Protocol: "tcp"},
		}}

	// setupAfter loads scripts with nft in hostNS, in order, then sets opts
	// up there.
	setupAfter := func(scripts ...string) {
		GinkgoHelper()
		Expect(hostNS.Do(func() error {
			for _, script := range scripts {
				if _, err := nftest.NftRun(script, "-f", "-"); err != nil {
					return err
				}
			}
			return newNFTablesPortMap().Setup(opts)
		})).To(Succeed())
	}

	It("lets kube-proxy's DNAT win over a hostPort on its NodePort made after it", func() {
		setupAfter(kubeProxy)
		Expect(who(otherPort)).To(Equal("pod"), "the hostPort's forward is live")
		Expect(who(nodePort)).To(Equal("service"), "kube-proxy's NodePort, not the hostPort equal to it")
	})

	// A node that ran upstream's portmap has its cni_hostport table, with
	// prerouting and output at dstnat; its forwards must keep working and
	// the Service must still win once we add ours.
	It("moves upstream's dstnat chains after kube-proxy's and keeps upstream's forwards", func() {
		upstream := `table ip cni_hostport {
	chain hostports { tcp dport 30087 dnat to 10.1.0.1:8002 comment "up"; }
	chain hostip_hostports { }
	chain prerouting { type nat hook prerouting priority -100; jump hostip_hostports; jump hostports; }
	chain output { type nat hook output priority -100; jump hostip_hostports; fib daddr type local jump hostports; }
	chain masquerading { type nat hook postrouting priority 100; }
}`
		setupAfter(kubeProxy, upstream)
		Expect(who(nodePort)).To(Equal("service"), "kube-proxy's NodePort, not the hostPort equal to it")
		Expect(who(otherPort)).To(Equal("pod"), "our forward")
		Expect(who(30087)).To(Equal("pod"), "upstream's forward")
		Expect(hostNS.Do(func() error {
			c, err := nftables.New()
			if err != nil {
				return err
			}
			chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
			if err != nil {
				return err
			}
			for _, ch := range chains {
				if ch.Table.Name == pmTable && (ch.Name == "prerouting" || ch.Name == "output") {
					Expect(*ch.Priority).To(Equal(*pmDNATPriority), ch.Name)
				}
			}
			return nil
		})).To(Succeed())
		// upstream's DEL of its attachment still finds its rule
		Expect(hostNS.Do(func() error {
			_, err := newNFTablesPortMap().Teardown(netfilter.Owner{Network: "n", ContainerID: "up"})
			return err
		})).To(Succeed())
		Expect(hostNS.Do(func() error {
			out, err := nftest.NftRun("", "list", "chain", "ip", pmTable, "hostports")
			Expect(out).NotTo(ContainSubstring(`comment "up"`))
			return err
		})).To(Succeed())
	})
})
