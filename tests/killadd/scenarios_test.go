package killadd

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/testutil"
)

// scenario is one network config list and the plugin whose ADD is killed.
type scenario struct {
	name string
	// target is the plugin type whose process group is killed, at moments
	// spread over its own ADD; "" kills whatever plugin of the list runs at
	// moments spread over the whole list's ADD (the full chain).
	target  string
	plugins func(e *env) []any
	caps    map[string]any
	// setup makes what the plugins expect on the stand-in host (a master
	// link, a device to move, a DHCP server).
	setup func(e *env)
	// noGC: no GC variant. A host-device's veth dies with the container
	// namespace the GC variant removes, so the host cannot return to its
	// baseline whatever the plugins do.
	noGC     bool
	features []kernelfeature.Feature // kernel-only plugins: labelled "kernel"
	// watchIPAM is the IPAM plugin named by target: the interface plugin
	// execs it, so its start is seen through inotify (killExec.watchIPAM).
	watchIPAM string
}

// hostLocal is dual-stack (two reservations to leak) with a default route.
func hostLocal(e *env) map[string]any {
	return map[string]any{
		"type": "host-local",
		"ranges": []any{
			[]any{map[string]any{"subnet": "10.77.0.0/24"}},
			[]any{map[string]any{"subnet": "fd00:77::/64"}},
		},
		"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
		"dataDir": e.dataDir,
	}
}

func bridge(backend string) func(e *env) map[string]any {
	return func(e *env) map[string]any {
		return map[string]any{"type": "bridge", "bridge": "kabr0", "isGateway": true,
			"ipMasq": true, "ipMasqBackend": backend, "ipam": hostLocal(e)}
	}
}

func ptp(backend string) func(e *env) map[string]any {
	return func(e *env) map[string]any {
		return map[string]any{"type": "ptp", "ipMasq": true, "ipMasqBackend": backend, "ipam": hostLocal(e)}
	}
}

func one(main func(e *env) map[string]any) func(e *env) []any {
	return func(e *env) []any { return []any{main(e)} }
}

// chained is main then meta: the main plugin completes, meta is killed.
func chained(main func(e *env) map[string]any, meta func(e *env) map[string]any) func(e *env) []any {
	return func(e *env) []any { return []any{main(e), meta(e)} }
}

func fixed(c map[string]any) func(e *env) map[string]any {
	return func(*env) map[string]any { return c }
}

// hostVeth makes a veth pair name/peer in the stand-in host, both up: a
// master for macvlan, ipvlan and vlan, a device for host-device.
func hostVeth(name, peer string) func(e *env) {
	return func(e *env) {
		Expect(testutil.ConnectNS(testutil.VethEnd{NS: e.hostNS, Name: name}, testutil.VethEnd{NS: e.hostNS, Name: peer})).To(Succeed())
	}
}

func tuning(e *env) map[string]any {
	return map[string]any{"type": "tuning", "dataDir": e.tuningDir, "mtu": 1400, "txQLen": 77,
		"promisc": true, "allmulti": true, "mac": "0a:58:0a:4d:00:99",
		"sysctl": map[string]any{"net.ipv4.conf.IFNAME.arp_filter": "1", "net.ipv6.conf.IFNAME.accept_ra": "0"}}
}

var (
	portMappings = map[string]any{"portMappings": []any{
		map[string]any{"hostPort": 18080, "containerPort": 8080, "protocol": "tcp"},
		map[string]any{"hostPort": 18053, "containerPort": 53, "protocol": "udp"},
	}}
	bandwidthCaps = map[string]any{"bandwidth": map[string]any{
		"ingressRate": 8000000, "ingressBurst": 800000, "egressRate": 8000000, "egressBurst": 800000}}
)

func caps(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// dhcpServer makes the network dhcp leases on: a bridge kadhcp0
// (10.99.0.1/24) in the stand-in host served by dnsmasq, and the dhcp
// daemon (never killed: only the plugin's client is).
func dhcpServer(e *env) {
	GinkgoHelper()
	h := testutil.Handle(e.hostNS)
	la := netlink.NewLinkAttrs()
	la.Name = "kadhcp0"
	br := &netlink.Bridge{LinkAttrs: la}
	Expect(h.LinkAdd(br)).To(Succeed())
	addr, err := netlink.ParseAddr("10.99.0.1/24")
	Expect(err).NotTo(HaveOccurred())
	Expect(h.AddrAdd(br, addr)).To(Succeed())
	Expect(h.LinkSetUp(br)).To(Succeed())
	e.dnsmasq = testutil.StartDnsmasq(e.hostNS, GinkgoT().TempDir(), "kadhcp0", "--dhcp-range=10.99.0.10,10.99.0.250,2m")
	testutil.StartDHCPDaemon(e.hostNS, filepath.Join(e.dhcpDir, "d.sock"), filepath.Join(e.dhcpDir, "state"),
		filepath.Join(GinkgoT().TempDir(), "daemon.log"))
}

func requireFeatures(fs []kernelfeature.Feature) { kernelfeature.Require(fs...) }

var scenarios = func() []scenario {
	var out []scenario
	for _, be := range []string{"iptables", "nftables"} {
		out = append(out,
			scenario{name: "bridge/" + be, target: "bridge", plugins: one(bridge(be))},
			scenario{name: "ptp/" + be, target: "ptp", plugins: one(ptp(be))},
			scenario{name: "portmap/" + be, target: "portmap", caps: portMappings,
				plugins: chained(ptp(be), fixed(map[string]any{"type": "portmap", "backend": be, "snat": true,
					"capabilities": map[string]any{"portMappings": true}}))},
			scenario{name: "full chain/" + be, caps: caps(portMappings, bandwidthCaps),
				plugins: func(e *env) []any {
					return []any{
						bridge(be)(e),
						map[string]any{"type": "portmap", "backend": be, "snat": true, "capabilities": map[string]any{"portMappings": true}},
						map[string]any{"type": "bandwidth", "capabilities": map[string]any{"bandwidth": true}},
						tuning(e),
						map[string]any{"type": "firewall", "backend": be},
					}
				}},
		)
	}
	out = append(out,
		scenario{name: "firewall/iptables", target: "firewall",
			plugins: chained(ptp("iptables"), fixed(map[string]any{"type": "firewall", "backend": "iptables"}))},
		scenario{name: "firewall/nftables", target: "firewall",
			plugins: chained(ptp("nftables"), fixed(map[string]any{"type": "firewall", "backend": "nftables"}))},
		// host-local alone: kills spread over host-local's own run inside
		// ptp's ADD (the group killed is ptp's, which host-local joined).
		scenario{name: "host-local", target: "host-local", watchIPAM: "host-local", plugins: one(ptp("iptables"))},
		scenario{name: "macvlan", target: "macvlan", setup: hostVeth("kamaster0", "kamaster1"),
			plugins: one(func(e *env) map[string]any {
				return map[string]any{"type": "macvlan", "master": "kamaster0", "mode": "bridge", "ipam": hostLocal(e)}
			})},
		scenario{name: "host-device", target: "host-device", setup: hostVeth("kadev0", "kadev1"), noGC: true,
			plugins: one(func(e *env) map[string]any {
				return map[string]any{"type": "host-device", "device": "kadev0", "ipam": hostLocal(e)}
			})},
		scenario{name: "tap", target: "tap", plugins: one(func(e *env) map[string]any {
			return map[string]any{"type": "tap", "ipam": hostLocal(e)}
		})},
		scenario{name: "dhcp", target: "bridge", setup: dhcpServer, plugins: one(func(e *env) map[string]any {
			return map[string]any{"type": "bridge", "bridge": "kadhcp0",
				"ipam": map[string]any{"type": "dhcp", "daemonSocketPath": filepath.Join(e.dhcpDir, "d.sock")}}
		})},
		scenario{name: "bandwidth", target: "bandwidth", caps: bandwidthCaps,
			plugins: chained(ptp("iptables"), fixed(map[string]any{"type": "bandwidth", "capabilities": map[string]any{"bandwidth": true}}))},
		// tuning on a host-device: what it changes outlives the attachment
		// unless DEL restores it (its state file).
		scenario{name: "tuning", target: "tuning", setup: hostVeth("kadev0", "kadev1"), noGC: true,
			plugins: chained(func(e *env) map[string]any {
				return map[string]any{"type": "host-device", "device": "kadev0", "ipam": hostLocal(e)}
			}, tuning)},
		scenario{name: "sbr", target: "sbr", plugins: chained(ptp("iptables"), fixed(map[string]any{"type": "sbr"}))},
		scenario{name: "ipvlan", target: "ipvlan", setup: hostVeth("kamaster0", "kamaster1"),
			features: []kernelfeature.Feature{kernelfeature.IPVlan},
			plugins: one(func(e *env) map[string]any {
				return map[string]any{"type": "ipvlan", "master": "kamaster0", "ipam": hostLocal(e)}
			})},
		scenario{name: "vlan", target: "vlan", setup: hostVeth("kamaster0", "kamaster1"),
			features: []kernelfeature.Feature{kernelfeature.VLAN},
			plugins: one(func(e *env) map[string]any {
				return map[string]any{"type": "vlan", "master": "kamaster0", "vlanId": 100, "ipam": hostLocal(e)}
			})},
		scenario{name: "dummy", target: "dummy", features: []kernelfeature.Feature{kernelfeature.Dummy},
			plugins: one(func(e *env) map[string]any { return map[string]any{"type": "dummy", "ipam": hostLocal(e)} })},
		scenario{name: "vrf", target: "vrf", features: []kernelfeature.Feature{kernelfeature.VRF},
			// After bridge: after ptp, vrf's ADD fails in the lane ("add
			// route 10.9.0.0/24 via 10.9.0.1 ...: network is unreachable":
			// ptp's /32 route to the gateway is not in the result vrf moves).
			plugins: chained(func(e *env) map[string]any {
				return map[string]any{"type": "bridge", "bridge": "kabr0", "isGateway": true, "ipam": map[string]any{
					"type": "host-local", "dataDir": e.dataDir, "subnet": "10.9.0.0/24", "routes": []any{map[string]any{"dst": "192.0.2.0/24"}}}}
			}, fixed(map[string]any{"type": "vrf", "vrfname": "kavrf0"}))},
	)
	return out
}()
