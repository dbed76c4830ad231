package bridge_test

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/bridge"
)

var _ = Describe("parseConfig", func() {
	wrap := func(keys string) []byte {
		return testutil.JoinConf(`"cniVersion": "1.0.0", "name": "n", "type": "bridge"`, keys, nil)
	}

	It("applies upstream's defaults", func() {
		c, err := bridge.ParseConfig(wrap(""), "")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Bridge).To(Equal("cni0"))
		Expect(c.IsGateway).To(BeFalse())
		Expect(c.PreserveDefaultVlan).To(BeFalse())
		Expect(c.EnableDad).To(BeFalse())
		Expect(c.Layer3()).To(BeFalse())
		Expect(c.MACString()).To(BeEmpty())
	})

	It("reads every key", func() {
		c, err := bridge.ParseConfig(wrap(`"bridge": "br7", "isDefaultGateway": true, "forceAddress": true,
			"ipMasq": true, "ipMasqBackend": "nftables", "ipMasqExcludeCIDRs": ["10.88.1.5/16", "fd00::/8"], "mtu": 1400, "hairpinMode": true, "vlan": 10,
			"vlanTrunk": [{"id": 20}, {"minID": 30, "maxID": 40}], "preserveDefaultVlan": true,
			"macspoofchk": true, "enabledad": true, "portIsolation": true,
			"ipam": {"type": "host-local", "subnet": "10.1.0.0/24"}, "dns": {"nameservers": ["10.1.0.53"]}`), "")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Bridge).To(Equal("br7"))
		Expect(c.IsGateway).To(BeTrue(), "isDefaultGateway implies isGateway")
		Expect(c.ForceAddress && c.IPMasq && c.HairpinMode && c.PreserveDefaultVlan &&
			c.MacSpoofChk && c.EnableDad && c.PortIsolation).To(BeTrue())
		Expect(c.Backend()).To(Equal("nftables"))
		Expect(fmt.Sprint(c.ExcludedCIDRs())).To(Equal("[10.88.0.0/16 fd00::/8]"), "masked")
		Expect(c.MTU).To(Equal(1400))
		Expect(c.Vlan).To(Equal(10))
		Expect(c.Trunks()).To(Equal([][2]int{{20, 20}, {30, 40}}))
		Expect(c.Layer3()).To(BeTrue())
		Expect(c.DNS.Nameservers).To(Equal([]string{"10.1.0.53"}))
	})

	// Upstream's collectVlanTrunk: an entry may hold "id" and a range both,
	// an empty one adds nothing, and the native vlan may lie in a range
	// (it is added last, untagged). A present but empty list turns vlan
	// filtering on.
	DescribeTable("reads vlanTrunk as upstream does",
		func(keys string, trunks [][2]int, filtering bool) {
			c, err := bridge.ParseConfig(wrap(keys), "")
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Trunks()).To(Equal(trunks))
			Expect(c.VlanFiltering()).To(Equal(filtering))
		},
		Entry("id and range in one entry", `"vlanTrunk": [{"id": 5, "minID": 10, "maxID": 20}]`, [][2]int{{10, 20}, {5, 5}}, true),
		Entry("an empty entry", `"vlanTrunk": [{}, {"id": 7}]`, [][2]int{{7, 7}}, true),
		Entry("the native vlan inside a range", `"vlan": 35, "vlanTrunk": [{"minID": 30, "maxID": 40}]`, [][2]int{{30, 40}}, true),
		Entry("an empty list", `"vlanTrunk": []`, [][2]int(nil), true),
		Entry("no list", ``, [][2]int(nil), false),
	)

	DescribeTable("picks the container MAC by precedence",
		func(keys, cniArgs, want string) {
			c, err := bridge.ParseConfig(wrap(keys), cniArgs)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.MACString()).To(Equal(want))
		},
		Entry("runtimeConfig first", `"runtimeConfig": {"mac": "02:00:00:00:00:01"}, "args": {"cni": {"mac": "02:00:00:00:00:02"}}`,
			"MAC=02:00:00:00:00:03", "02:00:00:00:00:01"),
		Entry("then args.cni.mac", `"args": {"cni": {"mac": "02:00:00:00:00:02"}}`, "MAC=02:00:00:00:00:03", "02:00:00:00:00:02"),
		Entry("then CNI_ARGS", ``, "IgnoreUnknown=1;K8S_POD_NAME=x;MAC=02:00:00:00:00:03", "02:00:00:00:00:03"),
	)

	DescribeTable("refuses invalid values with the key and value named",
		func(keys, cniArgs string, code uint, want string) {
			_, err := bridge.ParseConfig(wrap(keys), cniArgs)
			Expect(err).To(HaveOccurred())
			Expect(result.Code(err)).To(Equal(code))
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("hairpin with promisc", `"hairpinMode": true, "promiscMode": true`, "", uint(types.ErrInvalidNetworkConfig), "promiscMode"),
		Entry("vlan too big", `"vlan": 5000`, "", uint(types.ErrInvalidNetworkConfig), "vlan: 5000 out of range 0-4094"),
		Entry("negative vlan", `"vlan": -1`, "", uint(types.ErrInvalidNetworkConfig), "vlan: -1"),
		Entry("trunk id out of range", `"vlanTrunk": [{"id": 0}]`, "", uint(types.ErrInvalidNetworkConfig), "vlanTrunk[0]: id: 0 out of range"),
		Entry("trunk min > max", `"vlanTrunk": [{"minID": 50, "maxID": 40}]`, "", uint(types.ErrInvalidNetworkConfig), "minID 50 is greater than maxID 40"),
		Entry("trunk half range", `"vlanTrunk": [{"minID": 50}]`, "", uint(types.ErrInvalidNetworkConfig), "vlanTrunk[0]"),
		Entry("trunk maxID alone", `"vlanTrunk": [{"maxID": 50}]`, "", uint(types.ErrInvalidNetworkConfig), `vlanTrunk[0]: "minID" and "maxID" go together`),
		Entry("unknown backend", `"ipMasqBackend": "pf"`, "", uint(types.ErrInvalidNetworkConfig), `ipMasqBackend: "pf"`),
		Entry("mtu too small", `"mtu": 10`, "", uint(types.ErrInvalidNetworkConfig), "mtu: 10 out of range"),
		Entry("bridge name too long", `"bridge": "abcdefghijklmnopq"`, "", uint(types.ErrInvalidNetworkConfig), `bridge: "abcdefghijklmnopq"`),
		Entry("bridge name with slash", `"bridge": "a/b"`, "", uint(types.ErrInvalidNetworkConfig), `bridge: "a/b"`),
		Entry("bridge name with NUL", `"bridge": "br\u0000x"`, "", uint(types.ErrInvalidNetworkConfig), `bridge: "br\x00x"`),
		Entry("bridge name with %", `"bridge": "br%d"`, "", uint(types.ErrInvalidNetworkConfig), `bridge: "br%d"`),
		Entry("exclusion not a CIDR", `"ipMasqExcludeCIDRs": ["10.88.0.0/16", "10.89.0.0"]`, "", uint(types.ErrInvalidNetworkConfig), `ipMasqExcludeCIDRs[1]: "10.89.0.0" is not a CIDR`),
		Entry("exclusion of everything", `"ipMasqExcludeCIDRs": ["0.0.0.0/0"]`, "", uint(types.ErrInvalidNetworkConfig), `ipMasqExcludeCIDRs[0]: "0.0.0.0/0" excludes every destination`),
		Entry("exclusions not a list", `"ipMasqExcludeCIDRs": "10.88.0.0/16"`, "", uint(types.ErrInvalidNetworkConfig), `ipMasqExcludeCIDRs`),
		Entry("empty backend", `"ipMasqBackend": ""`, "", uint(types.ErrInvalidNetworkConfig), `ipMasqBackend: ""`),
		Entry("ipam type as a path", `"ipam": {"type": "../x"}`, "", uint(types.ErrInvalidNetworkConfig), `ipam.type: "../x"`),
		Entry("disabled interface with ipam", `"disableContainerInterface": true, "ipam": {"type": "host-local"}`, "",
			uint(types.ErrInvalidNetworkConfig), "disableContainerInterface"),
		Entry("bad runtimeConfig mac", `"runtimeConfig": {"mac": "zz"}`, "", uint(types.ErrInvalidNetworkConfig), `runtimeConfig.mac: "zz"`),
		Entry("multicast mac", `"args": {"cni": {"mac": "01:00:5e:00:00:01"}}`, "", uint(types.ErrInvalidNetworkConfig), "multicast"),
		Entry("bad CNI_ARGS mac", ``, "MAC=nope", uint(types.ErrInvalidEnvironmentVariables), `CNI_ARGS MAC: "nope"`),
		Entry("missing name", `"name": ""`, "", uint(types.ErrInvalidNetworkConfig), "name: missing"),
	)

	It("refuses undecodable JSON with code 6, a value of the wrong type with code 7", func() {
		_, err := bridge.ParseConfig([]byte(`{"name": `), "")
		Expect(result.Code(err)).To(BeEquivalentTo(types.ErrDecodingFailure))
		_, err = bridge.ParseConfig(wrap(`"vlan": "ten"`), "")
		Expect(result.Code(err)).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(err).To(MatchError(ContainSubstring(`vlan: "ten" is not a whole number`)))
	})
})
