package ptp_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

// A runtime's second ADD over a live attachment whose IPAM answers again
// (static) starts the masquerade before the veth step, which then fails:
// the undo must leave the live attachment's masquerade rules, not tear
// them down.
var _ = DescribeTable("a second ADD over a live attachment that fails at its veth keeps its masquerade rules",
	func(backend string) {
		hostNS, contNS := testutil.NewNS(), testutil.NewNS()
		stdin := []byte(`{"cniVersion": "1.1.0", "name": "` + netName + `", "type": "ptp", "ipMasq": true, "ipMasqBackend": "` + backend + `",
			"ipam": {"type": "static", "addresses": [{"address": "10.1.1.2/24", "gateway": "10.1.1.1"}]}}`)
		c := testutil.Call{Command: "ADD", ContainerID: "c1", IfName: "eth0", Netns: contNS.Path(), Stdin: stdin}
		testutil.MustRunIn(hostNS, ptpPlugin, c)
		live := natRules(hostNS)
		Expect(live).NotTo(BeEmpty())
		out := testutil.RunIn(hostNS, ptpPlugin, c)
		Expect(out.Err).NotTo(BeNil(), "the veth exists")
		Expect(natRules(hostNS)).To(Equal(live), "%s", out.Err.Msg)
	},
	Entry("iptables", "iptables"),
	Entry("nftables", "nftables"),
)
