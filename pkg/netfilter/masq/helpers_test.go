package masq

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/internal/nftest"
)

// countingMasq returns an iptables-nft backend that records the processes
// it runs.
func countingMasq(calls *[]string) *iptablesMasq {
	return &iptablesMasq{Runner: nftest.Counting(calls)}
}

// seededNAT returns a namespace whose nat tables (IPv4 and IPv6) hold
// another attachment's (seed's) rules, made by iptables-restore.
func seededNAT(seed netfilter.Owner) *ns.NetNS {
	GinkgoHelper()
	n := testutil.NewNS()
	Expect(nftest.In(n, func() error {
		return (&iptablesMasq{Runner: nftest.ViaRestore()}).Setup(seed, mustCIDRs("10.9.0.5/24", "fd00:9::5/64"))
	})).To(Succeed())
	return n
}
