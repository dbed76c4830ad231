package nft

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
	"github.com/cniforge/plugins/pkg/testutil"
)

// Tests for mutations that survived every earlier test (issue 29).
var _ = Describe("portmap details no other test looked at", func() {
	opts := pmtest.PortMapOpts

	// hairpin_nets holds what masquerades hairpin traffic from the
	// container's subnet: CHECK must miss it.
	It("nftables CHECK fails without the attachment's hairpin_nets element, naming the set", func() {
		n := testutil.NewNS()
		a := opts("ctr-a", true, pmtest.ManyMappings(1, 31000), "10.9.0.6")
		p := newNFTablesPortMap()
		Expect(nftest.In(n, func() error { return p.Setup(a) })).To(Succeed())
		Expect(nftest.In(n, func() error { return p.Check(a) })).To(Succeed())
		testutil.NetfilterOutput(n, "nft", "delete", "element", "ip", pmTable, pmHairpinNets, "{", "10.9.0.0/24", ".", "10.9.0.6", "}")
		err := nftest.In(n, func() error { return p.Check(a) })
		Expect(err).To(MatchError(hostport.ErrPortMapMissing))
		Expect(err.Error()).To(ContainSubstring("of " + pmHairpinNets))
		Expect(strings.Count(err.Error(), "missing")).To(Equal(1), err.Error())
	})
})
