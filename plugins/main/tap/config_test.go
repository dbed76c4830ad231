package tap_test

import (
	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/tap"
)

var _ = Describe("parseConfig", func() {
	wrap := func(keys string) []byte {
		return testutil.JoinConf(`"cniVersion": "1.0.0", "name": "n", "type": "tap"`, keys, nil)
	}

	It("applies upstream's defaults", func() {
		c, err := tap.ParseConfig(wrap(""), "")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.MultiQueue).To(BeFalse())
		Expect(c.MTU).To(BeZero())
		Expect(c.Owner).To(BeNil())
		Expect(c.Group).To(BeNil())
		Expect(c.Bridge).To(BeEmpty())
		Expect(c.MACString()).To(BeEmpty())
		Expect(c.HasIPAM()).To(BeFalse())
	})

	It("reads every key", func() {
		c, err := tap.ParseConfig(wrap(`"mac": "02:00:00:00:00:07", "mtu": 1400, "multiQueue": true,
			"owner": 1000, "group": 0, "selinuxContext": "system_u:system_r:container_t:s0", "bridge": "br0",
			"ipam": {"type": "host-local", "subnet": "10.1.0.0/24"}, "dns": {"nameservers": ["10.1.0.53"]}`), "")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.MACString()).To(Equal("02:00:00:00:00:07"))
		Expect(c.MTU).To(Equal(1400))
		Expect(c.MultiQueue).To(BeTrue())
		Expect(*c.Owner).To(BeEquivalentTo(1000))
		Expect(*c.Group).To(BeEquivalentTo(0))
		Expect(c.SelinuxContext).To(Equal("system_u:system_r:container_t:s0"))
		Expect(c.Bridge).To(Equal("br0"))
		Expect(c.HasIPAM()).To(BeTrue())
		Expect(c.DNS.Nameservers).To(Equal([]string{"10.1.0.53"}))
	})

	DescribeTable("picks the MAC by precedence",
		func(keys, cniArgs, want string) {
			c, err := tap.ParseConfig(wrap(keys), cniArgs)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.MACString()).To(Equal(want))
		},
		Entry("runtimeConfig first", `"mac": "02:00:00:00:00:04", "runtimeConfig": {"mac": "02:00:00:00:00:01"}, "args": {"cni": {"mac": "02:00:00:00:00:02"}}`,
			"MAC=02:00:00:00:00:03", "02:00:00:00:00:01"),
		Entry("then args.cni.mac", `"mac": "02:00:00:00:00:04", "args": {"cni": {"mac": "02:00:00:00:00:02"}}`, "MAC=02:00:00:00:00:03", "02:00:00:00:00:02"),
		Entry("then CNI_ARGS", `"mac": "02:00:00:00:00:04"`, "IgnoreUnknown=1;K8S_POD_NAME=x;MAC=02:00:00:00:00:03", "02:00:00:00:00:03"),
		Entry("then mac", `"mac": "02:00:00:00:00:04"`, "", "02:00:00:00:00:04"),
	)

	DescribeTable("refuses bad values with the code and the key",
		func(keys, cniArgs string, code uint, errHas string) {
			_, err := tap.ParseConfig(wrap(keys), cniArgs)
			Expect(err).To(HaveOccurred())
			Expect(result.Code(err)).To(Equal(code))
			Expect(err.Error()).To(ContainSubstring(errHas))
		},
		Entry("mtu", `"mtu": 12`, "", uint(types.ErrInvalidNetworkConfig), "mtu: 12"),
		Entry("mac", `"mac": "not-a-mac"`, "", uint(types.ErrInvalidNetworkConfig), `mac: "not-a-mac"`),
		Entry("multicast mac", `"mac": "01:00:5e:00:00:01"`, "", uint(types.ErrInvalidNetworkConfig), "multicast"),
		Entry("runtimeConfig.mac", `"runtimeConfig": {"mac": "zz"}`, "", uint(types.ErrInvalidNetworkConfig), `runtimeConfig.mac: "zz"`),
		Entry("CNI_ARGS MAC", ``, "MAC=zz", uint(types.ErrInvalidEnvironmentVariables), `CNI_ARGS MAC: "zz"`),
		Entry("CNI_ARGS", ``, "garbage", uint(types.ErrInvalidEnvironmentVariables), "CNI_ARGS"),
		Entry("bridge", `"bridge": "a/b"`, "", uint(types.ErrInvalidNetworkConfig), `bridge: "a/b"`),
		Entry("selinuxContext not a label", `"selinuxContext": "xxxx"`, "", uint(types.ErrInvalidNetworkConfig), `selinuxContext: "xxxx"`),
		Entry("selinuxContext with a path", `"selinuxContext": "../a:b:c"`, "", uint(types.ErrInvalidNetworkConfig), `selinuxContext: "../a:b:c"`),
		Entry("selinuxContext with an empty part", `"selinuxContext": "a::c"`, "", uint(types.ErrInvalidNetworkConfig), `selinuxContext: "a::c"`),
		Entry("owner", `"owner": 4294967295`, "", uint(types.ErrInvalidNetworkConfig), "owner: 4294967295"),
		Entry("group", `"group": 4294967295`, "", uint(types.ErrInvalidNetworkConfig), "group: 4294967295"),
		Entry("owner negative", `"owner": -1`, "", uint(types.ErrInvalidNetworkConfig), "owner: -1 is not a whole number from 0 to 4294967295"),
		Entry("ipam.type", `"ipam": {"type": "../x"}`, "", uint(types.ErrInvalidNetworkConfig), "ipam"),
		Entry("name", `"name": ""`, "", uint(types.ErrInvalidNetworkConfig), "name"),
	)

	It("refuses malformed JSON with code 6", func() {
		_, err := tap.ParseConfig([]byte(`{"name": `), "")
		Expect(result.Code(err)).To(Equal(uint(types.ErrDecodingFailure)))
	})
})
