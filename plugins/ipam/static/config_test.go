package static

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/result"
)

// netconf builds a config of the given version around an ipam body and the
// top-level extras (runtimeConfig, args).
func netconf(ver, ipam, extra string) []byte {
	if extra != "" {
		extra = ", " + extra
	}
	return []byte(fmt.Sprintf(`{"cniVersion": %q, "name": "net1", "type": "bridge", "ipam": {"type": "static"%s}%s}`,
		ver, ipam, extra))
}

// addrs renders the parsed addresses as "cidr[>gateway]" for comparison.
func addrs(conf *netConf) []string {
	out := []string{}
	for _, a := range conf.addresses {
		s := a.net.String()
		if a.gateway != nil {
			s += ">" + a.gateway.String()
		}
		out = append(out, s)
	}
	return out
}

var _ = Describe("parseConfig", func() {
	It("reads addresses, gateways, routes and DNS", func() {
		conf, err := parseConfig(netconf("1.1.0", `,
			"addresses": [
				{"address": "10.10.0.5/24", "gateway": "10.10.0.1"},
				{"address": "fd00:10::5/64", "gateway": "fd00:10::1"},
				{"address": "10.20.0.5/16"}],
			"routes": [
				{"dst": "0.0.0.0/0"},
				{"dst": "192.168.0.0/16", "gw": "10.10.0.254", "mtu": 1400, "priority": 5},
				{"dst": "::/0", "gw": "fd00:10::1"}],
			"dns": {"nameservers": ["10.10.0.53", "fd00:10::53"], "domain": "example.test",
				"search": ["a.example.test"], "options": ["ndots:2"]}`, ""), "")
		Expect(err).NotTo(HaveOccurred())
		Expect(conf.name).To(Equal("net1"))
		Expect(addrs(conf)).To(Equal([]string{"10.10.0.5/24>10.10.0.1", "fd00:10::5/64>fd00:10::1", "10.20.0.5/16"}))
		Expect(conf.addresses[0].net.IP).To(HaveLen(4), "IPv4 addresses are kept in 4-byte form")
		Expect(conf.routes).To(HaveLen(3))
		Expect(conf.routes[0].Dst.String()).To(Equal("0.0.0.0/0"))
		Expect(conf.routes[0].GW).To(BeNil())
		Expect(conf.routes[1].GW.String()).To(Equal("10.10.0.254"))
		Expect(conf.routes[1].MTU).To(Equal(1400))
		Expect(conf.routes[1].Priority).To(Equal(5))
		Expect(conf.dns).To(Equal(types.DNS{
			Nameservers: []string{"10.10.0.53", "fd00:10::53"}, Domain: "example.test",
			Search: []string{"a.example.test"}, Options: []string{"ndots:2"},
		}))
	})

	It("reads a config without cniVersion as 0.1.0", func() {
		conf, err := parseConfig([]byte(`{"name": "n", "ipam": {"addresses": [{"address": "10.1.0.2/24"}]}}`), "")
		Expect(err).NotTo(HaveOccurred())
		Expect(conf.cniVersion).To(Equal("0.1.0"))
	})

	It("accepts no addresses at all (an interface with routes or DNS only)", func() {
		conf, err := parseConfig(netconf("1.1.0", "", ""), "")
		Expect(err).NotTo(HaveOccurred())
		Expect(conf.addresses).To(BeEmpty())
	})

	It("accepts one address per family in a 0.2.0 config", func() {
		conf, err := parseConfig(netconf("0.2.0", `, "addresses": [{"address": "10.1.0.2/24"}, {"address": "fd00::2/64"}]`, ""), "")
		Expect(err).NotTo(HaveOccurred())
		Expect(addrs(conf)).To(Equal([]string{"10.1.0.2/24", "fd00::2/64"}))
	})

	It("reads a prevResult", func() {
		conf, err := parseConfig(netconf("1.0.0", "", `"prevResult": {"cniVersion": "1.0.0", "ips": [{"address": "10.1.0.2/24"}]}`), "")
		Expect(err).NotTo(HaveOccurred())
		Expect(conf.prevResult).NotTo(BeNil())
		Expect(conf.prevResult.IPs[0].Address.String()).To(Equal("10.1.0.2/24"))
	})

	DescribeTable("where addresses come from",
		func(ipam, extra, cniArgs string, want []string) {
			conf, err := parseConfig(netconf("1.1.0", ipam, extra), cniArgs)
			Expect(err).NotTo(HaveOccurred())
			Expect(addrs(conf)).To(Equal(want))
		},
		Entry("runtimeConfig.ips replaces everything else",
			`, "addresses": [{"address": "10.1.0.2/24", "gateway": "10.1.0.1"}]`,
			`"runtimeConfig": {"ips": ["10.3.0.3/24", "fd00:3::3/64"]}, "args": {"cni": {"ips": ["10.4.0.4/24"]}}`,
			"IP=10.5.0.5/24", []string{"10.3.0.3/24", "fd00:3::3/64"}),
		Entry("args.cni.ips replaces the config's addresses and CNI_ARGS",
			`, "addresses": [{"address": "10.1.0.2/24"}]`,
			`"args": {"cni": {"ips": ["10.4.0.4/24"]}}`,
			"IP=10.5.0.5/24;GATEWAY=10.5.0.1", []string{"10.4.0.4/24"}),
		Entry("args.cni.ips makes a bad CNI_ARGS IP irrelevant (CONVENTIONS.md: ignore it)",
			"", `"args": {"cni": {"ips": ["10.4.0.4/24"]}}`,
			"IP=nonsense", []string{"10.4.0.4/24"}),
		Entry("an empty runtimeConfig.ips falls through to args.cni.ips",
			"", `"runtimeConfig": {"ips": []}, "args": {"cni": {"ips": ["10.4.0.4/24"]}}`,
			"", []string{"10.4.0.4/24"}),
		Entry("CNI_ARGS IP adds to the config's addresses, as upstream does",
			`, "addresses": [{"address": "10.1.0.2/24"}]`, "",
			"IP=10.5.0.5/24, fd00:5::5/64", []string{"10.1.0.2/24", "10.5.0.5/24", "fd00:5::5/64"}),
		Entry("CNI_ARGS GATEWAY sets the gateway of the addresses whose subnet holds it",
			`, "addresses": [{"address": "10.1.0.2/24", "gateway": "10.1.0.254"}]`, "",
			"IP=10.5.0.5/24,fd00:5::5/64;GATEWAY=10.1.0.1,fd00:5::1",
			[]string{"10.1.0.2/24>10.1.0.1", "10.5.0.5/24", "fd00:5::5/64>fd00:5::1"}),
		Entry("CNI_ARGS with IgnoreUnknown passes other keys",
			"", "", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p;IP=10.5.0.5/24;",
			[]string{"10.5.0.5/24"}),
		Entry("CNI_ARGS IgnoreUnknown=true after the unknown key",
			"", "", "FOO=bar;IP=10.5.0.5/24;IgnoreUnknown=true", []string{"10.5.0.5/24"}),
	)

	DescribeTable("refuses invalid values with code 7, naming the key and value",
		func(ipam, extra, cniArgs, ver, msg string) {
			if ver == "" {
				ver = "1.1.0"
			}
			_, err := parseConfig(netconf(ver, ipam, extra), cniArgs)
			Expect(err).To(HaveOccurred())
			Expect(result.Code(err)).To(BeEquivalentTo(types.ErrInvalidNetworkConfig), err.Error())
			Expect(err.Error()).To(ContainSubstring(msg))
		},
		Entry("address without prefix",
			`, "addresses": [{"address": "10.0.0.2/24"}, {"address": "10.0.0.1"}]`, "", "", "",
			`ipam.addresses[1].address: "10.0.0.1" has no prefix length`),
		Entry("address that is not one",
			`, "addresses": [{"address": "10.0.0.300/24"}]`, "", "", "",
			`ipam.addresses[0].address: "10.0.0.300/24" is not an address in CIDR notation`),
		Entry("prefix out of range",
			`, "addresses": [{"address": "10.0.0.3/33"}]`, "", "", "",
			`ipam.addresses[0].address: "10.0.0.3/33" is not an address in CIDR notation`),
		Entry("empty address",
			`, "addresses": [{"gateway": "10.0.0.1"}]`, "", "", "",
			`ipam.addresses[0].address: missing`),
		Entry("gateway that is not an address",
			`, "addresses": [{"address": "10.0.0.2/24", "gateway": "10.0.0"}]`, "", "", "",
			`ipam.addresses[0].gateway: "10.0.0" is not an IP address`),
		Entry("gateway of the other family",
			`, "addresses": [{"address": "10.0.0.2/24", "gateway": "fd00::1"}]`, "", "", "",
			`ipam.addresses[0].gateway: fd00::1 is not of the same IP family as 10.0.0.2/24`),
		Entry("the same address twice",
			`, "addresses": [{"address": "10.0.0.2/24"}, {"address": "10.0.0.2/16"}]`, "", "", "",
			`ipam.addresses[1]: 10.0.0.2 is already given by ipam.addresses[0]`),
		Entry("two IPv4 addresses in a 0.2.0 result",
			`, "addresses": [{"address": "10.0.0.2/24"}, {"address": "10.1.0.2/24"}]`, "", "", "0.2.0",
			`cniVersion 0.2.0 results hold one address per IP family, got 2 IPv4 and 0 IPv6`),
		Entry("two IPv6 addresses in a 0.1.0 result, through runtimeConfig",
			"", `"runtimeConfig": {"ips": ["fd00::2/64", "fd01::2/64"]}`, "", "0.1.0",
			`cniVersion 0.1.0 results hold one address per IP family, got 0 IPv4 and 2 IPv6`),
		Entry("runtimeConfig.ips without prefix",
			"", `"runtimeConfig": {"ips": ["10.3.0.3"]}`, "", "",
			`runtimeConfig.ips[0]: "10.3.0.3" has no prefix length`),
		Entry("args.cni.ips that is not an address",
			"", `"args": {"cni": {"ips": ["10.4.0.4/24", "bogus/24"]}}`, "", "",
			`args.cni.ips[1]: "bogus/24" is not an address in CIDR notation`),
		Entry("CNI_ARGS IP without prefix",
			"", "", "IP=10.5.0.5/24,10.6.0.6", "",
			`CNI_ARGS IP[1]: "10.6.0.6" has no prefix length`),
		Entry("CNI_ARGS GATEWAY that is not an address",
			"", "", "IP=10.5.0.5/24;GATEWAY=gw", "",
			`CNI_ARGS GATEWAY[0]: "gw" is not an IP address`),
		Entry("CNI_ARGS key in the wrong case, as upstream",
			"", "", "ip=10.5.0.5/24", "",
			`CNI_ARGS: unknown key "ip"`),
		Entry("CNI_ARGS unknown key without IgnoreUnknown",
			"", "", "K8S_POD_NAME=p;IP=10.5.0.5/24", "",
			`CNI_ARGS: unknown key "K8S_POD_NAME"`),
		Entry("CNI_ARGS IgnoreUnknown that is not a boolean",
			"", "", "IgnoreUnknown=yes", "",
			`CNI_ARGS IgnoreUnknown: "yes" is not a boolean`),
		Entry("CNI_ARGS pair without =",
			"", "", "IP", "",
			`CNI_ARGS: "IP" is not a KEY=VALUE pair`),
		Entry("route dst that is not a CIDR",
			`, "routes": [{"dst": "0.0.0.0/0"}, {"dst": "10.0.0.0"}]`, "", "", "",
			`ipam.routes[1].dst: "10.0.0.0" is not a CIDR`),
		Entry("route dst with host bits",
			`, "routes": [{"dst": "10.0.0.5/24"}]`, "", "", "",
			`ipam.routes[0].dst: "10.0.0.5/24" has host bits set (the network is 10.0.0.0/24)`),
		Entry("route without dst",
			`, "routes": [{"gw": "10.0.0.1"}]`, "", "", "",
			`ipam.routes[0].dst: missing`),
		Entry("route gw that is not an address",
			`, "routes": [{"dst": "0.0.0.0/0", "gw": "x"}]`, "", "", "",
			`ipam.routes[0].gw: "x" is not an IP address`),
		Entry("route gw of the other family",
			`, "routes": [{"dst": "::/0", "gw": "10.0.0.1"}]`, "", "", "",
			`ipam.routes[0].gw: 10.0.0.1 is not of the same IP family as dst ::/0`),
		Entry("nameserver that is not an address",
			`, "dns": {"nameservers": ["10.0.0.53", "dns.example"]}`, "", "", "",
			`ipam.dns.nameservers[1]: "dns.example" is not an IP address`),
	)

	It("refuses a config without a name or ipam with code 7", func() {
		_, err := parseConfig([]byte(`{"cniVersion": "1.1.0", "ipam": {}}`), "")
		Expect(result.Code(err)).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(err.Error()).To(ContainSubstring("name: missing"))
		_, err = parseConfig([]byte(`{"cniVersion": "1.1.0", "name": "n"}`), "")
		Expect(result.Code(err)).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(err.Error()).To(ContainSubstring("ipam: missing"))
	})

	DescribeTable("refuses what does not decode with code 6",
		func(stdin string) {
			_, err := parseConfig([]byte(stdin), "")
			Expect(err).To(HaveOccurred())
			Expect(result.Code(err)).To(BeEquivalentTo(types.ErrDecodingFailure), err.Error())
		},
		Entry("truncated JSON", `{"cniVersion": "1.1.0", "name": `),
		Entry("a prevResult that is not a result", `{"cniVersion": "1.1.0", "name": "n", "ipam": {}, "prevResult": {"ips": 5}}`),
	)

	DescribeTable("refuses a value of the wrong type with code 7, naming key and value",
		func(stdin, names string) {
			_, err := parseConfig([]byte(stdin), "")
			Expect(err).To(HaveOccurred())
			Expect(result.Code(err)).To(BeEquivalentTo(types.ErrInvalidNetworkConfig), err.Error())
			Expect(err.Error()).To(ContainSubstring(names))
		},
		Entry("addresses", `{"cniVersion": "1.1.0", "name": "n", "ipam": {"addresses": "10.0.0.2/24"}}`, `ipam.addresses: "10.0.0.2/24" is not a list`),
		Entry("runtimeConfig.ips", `{"cniVersion": "1.1.0", "name": "n", "ipam": {}, "runtimeConfig": {"ips": "10.0.0.2/24"}}`, `runtimeConfig.ips: "10.0.0.2/24" is not a list`),
		Entry("a route's mtu", `{"cniVersion": "1.1.0", "name": "n", "ipam": {"addresses": [{"address": "10.0.0.2/24"}], "routes": [{"dst": "0.0.0.0/0"}, {"dst": "10.9.0.0/16", "mtu": "x"}]}}`, `ipam.routes[1].mtu: "x" is not a whole number`),
	)
})
