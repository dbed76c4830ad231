package ptp_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/ptp"
)

// A runtime's second ADD over a live attachment is refused before IPAM: an
// IPAM that answers the attachment again with its live address (dhcp hands
// back a live lease unchanged) would otherwise see ADD's undo release it.
var _ = It("refuses a second ADD over a live attachment before asking IPAM, so no undo releases the live address", func() {
	hostNS, contNS := testutil.NewNS(), testutil.NewNS()
	dir := GinkgoT().TempDir()
	calls := filepath.Join(dir, "calls")
	// Like the dhcp plugin for an attachment it already leases to: the
	// same address again on ADD; a DEL would release it.
	Expect(os.WriteFile(filepath.Join(dir, "lease-ipam"), []byte(`#!/bin/sh
echo "$CNI_COMMAND $CNI_CONTAINERID $CNI_IFNAME" >> `+calls+`
[ "$CNI_COMMAND" = ADD ] && echo '{"cniVersion": "1.1.0", "ips": [{"address": "10.1.1.2/24", "gateway": "10.1.1.1"}]}'
exit 0
`), 0o755)).To(Succeed())
	stdin := []byte(`{"cniVersion": "1.1.0", "name": "` + netName + `", "type": "ptp", "ipam": {"type": "lease-ipam"}}`)
	c := testutil.Call{Command: "ADD", ContainerID: "c1", IfName: "eth0", Netns: contNS.Path(), Stdin: stdin, Path: dir}
	testutil.MustRunIn(hostNS, ptpPlugin, c)
	hostLinks := testutil.LinkNames(hostNS)

	out := testutil.RunIn(hostNS, ptpPlugin, c)
	Expect(out.Err).NotTo(BeNil())
	got, err := os.ReadFile(calls)
	Expect(err).NotTo(HaveOccurred())
	Expect(string(got)).To(Equal("ADD c1 eth0\n"), "IPAM is asked once, by the first ADD, and never to release")
	Expect(out.Err.Msg).To(ContainSubstring(`a link "eth0" already exists in ` + contNS.Path()))
	Expect(testutil.LinkNames(hostNS)).To(Equal(hostLinks))
	Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo", "eth0"))
})

// An ADD for an attachment whose veth pair went without a DEL (deleted by
// hand or by another tool), so its masquerade rules stay, starts the
// masquerade before its veth step: when ADD fails after that step, the
// undo must leave those rules as the first ADD installed them, not tear
// them down.
var _ = DescribeTable("a repeated ADD whose veth was gone, failing after its veth step, keeps the masquerade rules",
	func(backend string) {
		hostNS, contNS := testutil.NewNS(), testutil.NewNS()
		stdin := []byte(`{"cniVersion": "1.1.0", "name": "` + netName + `", "type": "ptp", "ipMasq": true, "ipMasqBackend": "` + backend + `",
			"ipam": {"type": "static", "addresses": [{"address": "10.1.1.2/24", "gateway": "10.1.1.1"}]}}`)
		c := testutil.Call{Command: "ADD", ContainerID: "c1", IfName: "eth0", Netns: contNS.Path(), Stdin: stdin}
		testutil.MustRunIn(hostNS, ptpPlugin, c)
		live := natRules(hostNS)
		Expect(live).NotTo(BeEmpty())
		Expect(ip.DelLinkByName(testutil.Handle(contNS), "eth0")).To(Succeed()) // and its peer with it
		hostLinks := testutil.LinkNames(hostNS)

		failing := ptp.New(attach.Hooks{AfterStep: testutil.FailAfter(ptp.StepVeth, nil)})
		out := testutil.RunIn(hostNS, failing, c)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring(testutil.ErrInjected.Error()))
		Expect(natRules(hostNS)).To(Equal(live), "%s", out.Err.Msg)
		Expect(testutil.LinkNames(hostNS)).To(Equal(hostLinks), "the undo deletes the new veth")
	},
	Entry("iptables", "iptables"),
	Entry("nftables", "nftables"),
)
