package dhcp

import (
	"github.com/containernetworking/cni/pkg/types"
	"github.com/insomniacslk/dhcp/dhcpv4"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/result"
)

func conf(ipam string) []byte {
	return []byte(`{"cniVersion": "1.1.0", "name": "net1", "type": "bridge", "ipam": {"type": "dhcp"` + ipam + `}}`)
}

var _ = Describe("parseConfig", func() {
	It("defaults to upstream's socket, IPv4 only and upstream's requested options", func() {
		c, err := parseConfig(conf(""))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.SocketPath).To(Equal("/run/cni/dhcp.sock"))
		Expect(c.IPv4).To(BeTrue())
		Expect(c.IPv6).To(BeFalse())
		Expect(c.Request).To(Equal([]uint8{1, 3, 33, 121}))
		Expect(c.Priority).To(Equal(0))
	})

	It("reads every key", func() {
		c, err := parseConfig(conf(`, "daemonSocketPath": "/tmp/x.sock", "priority": 200,
			"ipFamilies": ["ipv4", "ipv6"],
			"request": [{"option": "domain-name-servers"}, {"option": "121"}],
			"provide": [{"option": "host-name", "fromArg": "K8S_POD_NAME"}, {"option": "60", "value": "cniforge"}]`))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.SocketPath).To(Equal("/tmp/x.sock"))
		Expect(c.Priority).To(Equal(200))
		Expect(c.IPv4).To(BeTrue())
		Expect(c.IPv6).To(BeTrue())
		Expect(c.Request).To(Equal([]uint8{1, 3, 33, 121, 6}))
		Expect(c.Provide).To(Equal([]Provide{{Option: 12, FromArg: "K8S_POD_NAME"}, {Option: 60, Value: "cniforge"}}))
	})

	It("drops the default requests with skipDefault", func() {
		c, err := parseConfig(conf(`, "request": [{"skipDefault": true, "option": "router"}]`))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Request).To(Equal([]uint8{3}))
	})

	It("runs DHCPv6 alone with ipFamilies [\"ipv6\"]", func() {
		c, err := parseConfig(conf(`, "ipFamilies": ["ipv6"]`))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.IPv4).To(BeFalse())
		Expect(c.IPv6).To(BeTrue())
	})

	DescribeTable("refuses bad input with its code, naming the key",
		func(stdin string, code uint, msg string) {
			_, err := parseConfig([]byte(stdin))
			Expect(err).To(HaveOccurred())
			Expect(result.Code(err)).To(Equal(code))
			Expect(err.Error()).To(ContainSubstring(msg))
		},
		Entry("malformed JSON", `{"name": `, uint(types.ErrDecodingFailure), "parse config"),
		Entry("no name", `{"cniVersion": "1.0.0", "ipam": {"type": "dhcp"}}`, uint(types.ErrInvalidNetworkConfig), "name: missing"),
		Entry("no ipam", `{"cniVersion": "1.0.0", "name": "n"}`, uint(types.ErrInvalidNetworkConfig), "ipam: missing"),
		Entry("relative socket", string(conf(`, "daemonSocketPath": "dhcp.sock"`)), uint(types.ErrInvalidNetworkConfig), `ipam.daemonSocketPath: "dhcp.sock"`),
		Entry("socket not a string", string(conf(`, "daemonSocketPath": 5`)), uint(types.ErrInvalidNetworkConfig), "ipam.daemonSocketPath"),
		Entry("negative priority", string(conf(`, "priority": -1`)), uint(types.ErrInvalidNetworkConfig), "ipam.priority: -1"),
		Entry("priority above 32 bits", string(conf(`, "priority": 4294967296`)), uint(types.ErrInvalidNetworkConfig), "ipam.priority: 4294967296 out of range"),
		Entry("unknown option name", string(conf(`, "request": [{"option": "nope"}]`)), uint(types.ErrInvalidNetworkConfig), `ipam.request[0].option: "nope"`),
		Entry("option out of range", string(conf(`, "request": [{"option": "300"}]`)), uint(types.ErrInvalidNetworkConfig), `ipam.request[0].option: "300" out of range`),
		Entry("provide a message type", string(conf(`, "provide": [{"option": "53", "value": "x"}]`)), uint(types.ErrInvalidNetworkConfig), "ipam.provide[0].option: 53 (message type)"),
		Entry("provide without option", string(conf(`, "provide": [{"value": "x"}]`)), uint(types.ErrInvalidNetworkConfig), "ipam.provide[0].option: missing"),
		Entry("unknown family", string(conf(`, "ipFamilies": ["ipx"]`)), uint(types.ErrInvalidNetworkConfig), `ipam.ipFamilies[0]: "ipx"`),
	)
})

// Upstream's daemon (options.go, lease.go prepareOptions) skips a request
// entry without an option and a provide entry with neither value nor
// fromArg, sends both of an entry with both (the CNI_ARGS one last), and
// takes "dhcp-client-identifier" (61) from provide.
var _ = Describe("entries upstream accepts", func() {
	It("skips empty entries", func() {
		c, err := parseConfig(conf(`, "request": [{}, {"option": "router"}], "provide": [{"option": "host-name"}]`))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Request).To(Equal(defaultRequested))
		Expect(c.Provide).To(BeEmpty())
	})
	It("sends fromArg's value when CNI_ARGS has it, else value", func() {
		c, err := parseConfig(conf(`, "provide": [{"option": "host-name", "value": "fixed", "fromArg": "K8S_POD_NAME"}]`))
		Expect(err).NotTo(HaveOccurred())
		Expect(providedValues(c, "K8S_POD_NAME=web-0")).To(Equal(map[uint8]string{12: "web-0"}))
		Expect(providedValues(c, "IgnoreUnknown=1")).To(Equal(map[uint8]string{12: "fixed"}))
	})
	It("sends a provided client identifier in place of the attachment's", func() {
		c, err := parseConfig(conf(`, "provide": [{"option": "dhcp-client-identifier", "value": "host-a"}]`))
		Expect(err).NotTo(HaveOccurred())
		m, err := dhcpv4.New((&daemon{}).modifiers4(c, clientID("ctr1", "net", "eth0"), "")...)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(m.Options.Get(dhcpv4.OptionClientIdentifier))).To(Equal("host-a"))

		c, err = parseConfig(conf(``))
		Expect(err).NotTo(HaveOccurred())
		m, err = dhcpv4.New((&daemon{}).modifiers4(c, clientID("ctr1", "net", "eth0"), "")...)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(m.Options.Get(dhcpv4.OptionClientIdentifier))).To(Equal("ctr1/net/eth0"))
	})
})

var _ = Describe("providedValues", func() {
	It("copies CNI_ARGS values named by fromArg and skips missing ones", func() {
		c, err := parseConfig(conf(`, "provide": [{"option": "host-name", "fromArg": "K8S_POD_NAME"},
			{"option": "60", "fromArg": "MISSING"}, {"option": "77", "value": "fixed"}]`))
		Expect(err).NotTo(HaveOccurred())
		Expect(providedValues(c, "IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=default")).To(Equal(
			map[uint8]string{12: "web-0", 77: "fixed"}))
	})
})
