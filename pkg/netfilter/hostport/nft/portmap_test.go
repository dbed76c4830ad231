package nft

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
	"net"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/hostport/internal/pmtest"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// Issue 22, defect 2: 5,000 mappings take several batches (batch.go);
// a batch the kernel refuses after others went through leaves the
// attachment as it was before Setup.
var _ = Describe("nftables Setup over several batches", func() {
	ownElems := func(p *nftablesPortMap, o netfilter.Owner) int {
		GinkgoHelper()
		c, err := p.conn()
		Expect(err).NotTo(HaveOccurred())
		defer c.CloseLasting()
		n := 0
		for _, f := range nftnl.Families {
			s, err := p.read(c, f, false, true)
			Expect(err).NotTo(HaveOccurred())
			for _, set := range pmSets(f) {
				n += len(s.own(set.Name, nftPMHash(o)))
			}
		}
		return n
	}
	base := func(id string, ms []hostport.PortMapping) hostport.PortMapOptions {
		return hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: id}, SNAT: true, Mappings: ms,
			ContainerIPs: []net.IPNet{{IP: net.ParseIP("10.1.0.5"), Mask: net.CIDRMask(24, 32)}, {IP: net.ParseIP("fd00:1::5"), Mask: net.CIDRMask(64, 128)}}}
	}

	It("adds 5,000 mappings, and a refused later batch undoes the earlier ones, for a first ADD and a replacing one", func() {
		hostNS := testutil.NewNS()
		Expect(hostNS.Do(func() error {
			defer GinkgoRecover()
			other := base("other", pmtest.ManyMappings(3, 40000))
			other.ContainerIPs = []net.IPNet{{IP: net.ParseIP("10.1.0.6")}}
			p := newNFTablesPortMap()
			Expect(p.Setup(other)).To(Succeed())

			many := base("c", pmtest.ManyMappings(5000, 20000))
			batches := 0
			p.failBatch = func(n int) bool { batches = n; return false }
			Expect(p.Setup(many)).To(Succeed())
			Expect(batches).To(BeNumerically(">", 3), "5,000 mappings take several batches")
			Expect(p.Check(many)).To(Succeed())
			Expect(ownElems(p, many.Owner)).To(Equal(2*5000 + 2))
			_, err := p.Teardown(many.Owner)
			Expect(err).NotTo(HaveOccurred())
			Expect(ownElems(p, many.Owner)).To(BeZero())

			p.failBatch = func(n int) bool { return n == 3 }
			Expect(p.Setup(many)).NotTo(Succeed())
			Expect(ownElems(p, many.Owner)).To(BeZero(), "a first ADD leaves nothing")

			few := base("c", pmtest.ManyMappings(10, 30000))
			p.failBatch = nil
			Expect(p.Setup(few)).To(Succeed())
			p.failBatch = func(n int) bool { return n == 3 }
			Expect(p.Setup(many)).NotTo(Succeed())
			Expect(p.Check(few)).To(Succeed(), "a replacing ADD leaves the mappings it replaced")
			Expect(ownElems(p, many.Owner)).To(Equal(2*10+2), "and nothing of the new ones")
			Expect(p.Check(other)).To(Succeed(), "another attachment's mappings stay")
			return nil
		})).To(Succeed())
	})
})

// A kernel before 5.6 cannot make hairpin_nets: Setup then adds the
// hairpin element of before issue 22, and CHECK and DEL take it.
var _ = Describe("nftables Setup on a kernel without hairpin_nets", func() {
	It("uses the hairpin set, makes neither hairpin_nets nor masquerading_nets, and CHECK and Teardown take it", func() {
		hostNS := testutil.NewNS()
		Expect(hostNS.Do(func() error {
			defer GinkgoRecover()
			opts := hostport.PortMapOptions{Owner: netfilter.Owner{Network: "n", ContainerID: "c"}, SNAT: true, Mappings: pmtest.ManyMappings(2, 20000),
				ContainerIPs: []net.IPNet{{IP: net.ParseIP("10.1.0.5"), Mask: net.CIDRMask(24, 32)}}}
			p := newNFTablesPortMap()
			p.legacyHairpin = true
			Expect(p.Setup(opts)).To(Succeed())
			c, err := p.conn()
			Expect(err).NotTo(HaveOccurred())
			defer c.CloseLasting()
			s, err := p.read(c, nftnl.IPv4, false, true)
			Expect(err).NotTo(HaveOccurred())
			Expect(s.elems).NotTo(HaveKey(pmHairpinNets))
			Expect(s.chains).NotTo(HaveKey(pmMasqNetsChain))
			Expect(s.own(pmHairpin, nftPMHash(opts.Owner))).To(HaveLen(1))
			Expect(newNFTablesPortMap().Check(opts)).To(Succeed())
			Expect(p.Setup(opts)).To(Succeed(), "again")
			_, err = newNFTablesPortMap().Teardown(opts.Owner)
			Expect(err).NotTo(HaveOccurred())
			s, err = p.read(c, nftnl.IPv4, false, true)
			Expect(err).NotTo(HaveOccurred())
			Expect(s.own(pmHairpin, nftPMHash(opts.Owner))).To(BeEmpty())
			return nil
		})).To(Succeed())
	})
})

func TestRetryLegacyHairpin(t *testing.T) {
	refused := fmt.Errorf("set up: %w", errors.Join(errors.New("other"), fmt.Errorf("conn.Receive: %w", unix.EOPNOTSUPP)))
	for _, tc := range []struct {
		name        string
		err         error
		netsMissing bool
		want        bool
	}{
		{"refused while making hairpin_nets", refused, true, true},
		{"refused as invalid (before 5.5)", fmt.Errorf("x: %w", unix.EINVAL), true, true},
		{"refused, but hairpin_nets was there", refused, false, false},
		{"another error", fmt.Errorf("x: %w", unix.ENOENT), true, false},
		{"no error", nil, true, false},
	} {
		if got := retryLegacyHairpin(tc.err, tc.netsMissing); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
