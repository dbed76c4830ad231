package nftnl

import (
	"fmt"
	"time"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
)

var _ = Describe("generation-consistent nftables reads", func() {
	var curNS *ns.NetNS
	BeforeEach(func() { curNS = testutil.NewNS() })

	// commit makes one nftables commit in the calling thread's namespace,
	// as another plugin would in the middle of a read.
	commit := func(i int) error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		c.AddTable(&nftables.Table{Name: fmt.Sprintf("racer%d", i), Family: nftables.TableFamilyINet})
		return c.Flush()
	}

	It("reads again, without waiting out a pause, until no commit raced the read", func() {
		tries := 0
		var v int
		start := time.Now()
		Expect(in(curNS, func() (err error) {
			v, err = Consistent(func() (int, error) {
				tries++
				if tries <= 5 {
					return tries, commit(tries)
				}
				return tries, nil
			})
			return err
		})).To(Succeed())
		Expect(v).To(Equal(6))
		Expect(tries).To(Equal(6))
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	})

	It("gives up with errRulesetBusy when every read within the budget raced a commit", func() {
		tries := 0
		start := time.Now()
		err := in(curNS, func() error {
			_, err := consistentWithin(nil, 300*time.Millisecond, func() (int, error) {
				tries++
				return tries, commit(tries)
			})
			return err
		})
		Expect(err).To(MatchError(errRulesetBusy))
		Expect(err.Error()).To(ContainSubstring("for 300ms"))
		Expect(tries).To(BeNumerically(">", 1))
		Expect(time.Since(start)).To(BeNumerically(">=", 300*time.Millisecond))
	})

	It("passes a read error through without retrying", func() {
		tries := 0
		err := in(curNS, func() error {
			_, err := Consistent(func() (int, error) {
				tries++
				return 0, fmt.Errorf("dump: %w", netfilter.ErrMissing)
			})
			return err
		})
		Expect(err).To(MatchError(netfilter.ErrMissing))
		Expect(tries).To(Equal(1))
	})
})

func in(n *ns.NetNS, fn func() error) error { return n.Do(fn) }
