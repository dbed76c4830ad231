package testutil_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("node snapshots", func() {
	It("zero the counters of every dump format, in one place", func() {
		Expect(testutil.ZeroCounters(":POSTROUTING ACCEPT [12:3456]\n")).To(Equal(":POSTROUTING ACCEPT [0:0]\n"))
		Expect(testutil.ZeroCounters("counter packets 3 bytes 180 accept")).To(Equal("counter packets 0 bytes 0 accept"))
		Expect(testutil.ZeroCounters(`{"counter": {"packets": 3, "bytes": 180}}`)).To(Equal(`{"counter": {"packets": 0, "bytes": 0}}`))
	})

	It("see a link, an address, a file and a rule added, by section, and nothing between two reads of the same node", func() {
		host, dir := testutil.NewNS(), filepath.Join(GinkgoT().TempDir(), "state")
		Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
		opts := testutil.NodeOpts{Host: host, Sysctls: true, Netfilter: true, Dirs: []string{dir}}
		before := testutil.TakeNodeSnapshot(opts)
		Expect(before.Diff(testutil.TakeNodeSnapshot(opts))).To(BeEmpty())

		Expect(testutil.ConnectNS(testutil.VethEnd{NS: host, Name: "snap0", Addrs: []string{"10.71.0.1/24"}},
			testutil.VethEnd{NS: testutil.NewNS(), Name: "snap1"})).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "x"), []byte("10.71.0.2"), 0o600)).To(Succeed())
		Expect(host.Do(func() error { _, err := runIn("nft", "add table inet cniforge_snap"); return err })).To(Succeed())
		after := testutil.TakeNodeSnapshot(opts)

		changes := before.Changes(after)
		Expect(changes).To(ContainElement(HavePrefix("host link: + snap0 ")))
		Expect(changes).To(ContainElement("host addr: + snap0 10.71.0.1/24"))
		Expect(changes).To(ContainElement(MatchRegexp(`^host route: \+ table=254 .*dev=snap0`)))
		Expect(changes).To(ContainElement(HavePrefix("host sysctl: + /proc/sys/net/ipv4/conf/snap0/")))
		Expect(changes).To(ContainElement(`file: + state/x file "10.71.0.2"`))
		Expect(changes).To(ContainElement(HavePrefix("netfilter: + nft table inet cniforge_snap ")))
		Expect(changes).NotTo(ContainElement(HavePrefix("host link: - ")))
		Expect(before.Diff(after)).To(ContainSubstring("host addr:\n  + snap0 10.71.0.1/24\n"))

		Expect(after.Changes(before)).To(ContainElement("host addr: - snap0 10.71.0.1/24"))
	})
})
