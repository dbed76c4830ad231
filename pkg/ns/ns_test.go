package ns_test

import (
	"errors"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("NetNS", func() {
	It("refuses a path that is not a network namespace", func() {
		_, err := ns.Open("/proc/self/status")
		Expect(errors.Is(err, ns.ErrNotNetNS)).To(BeTrue(), "%v", err)

		_, err = ns.Open("/proc/self/ns/uts")
		Expect(errors.Is(err, ns.ErrNotNetNS)).To(BeTrue(), "%v", err)

		_, err = ns.Open("/run/netns/does-not-exist-cniforge")
		Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "%v", err)
	})

	It("runs Do inside the namespace and leaves the caller's thread alone", func() {
		a := testutil.NewNS()
		b := testutil.NewNS()

		before, err := ns.Current()
		Expect(err).NotTo(HaveOccurred())
		defer before.Close()

		var inside *ns.NetNS
		Expect(a.Do(func() error {
			var err error
			inside, err = ns.Current()
			return err
		})).To(Succeed())
		defer inside.Close()
		Expect(inside.Same(a)).To(BeTrue())
		Expect(inside.Same(b)).To(BeFalse())

		after, err := ns.Current()
		Expect(err).NotTo(HaveOccurred())
		defer after.Close()
		Expect(after.Same(before)).To(BeTrue())
	})

	It("nests: Do inside Do sees the inner namespace, then the outer again", func() {
		outer := testutil.NewNS()
		inner := testutil.NewNS()
		Expect(outer.Do(func() error {
			if err := inner.Do(func() error {
				cur, err := ns.Current()
				if err != nil {
					return err
				}
				defer cur.Close()
				if same, _ := cur.Same(inner); !same {
					return errors.New("not in inner")
				}
				return nil
			}); err != nil {
				return err
			}
			cur, err := ns.Current()
			if err != nil {
				return err
			}
			defer cur.Close()
			if same, _ := cur.Same(outer); !same {
				return errors.New("not back in outer")
			}
			return nil
		})).To(Succeed())
	})

	It("gives a netlink handle bound to the namespace", func() {
		n := testutil.NewNS()
		h, err := n.Handle()
		Expect(err).NotTo(HaveOccurred())
		defer h.Close()
		la := netlink.NewLinkAttrs()
		la.Name = "probe0"
		Expect(h.LinkAdd(&netlink.Bridge{LinkAttrs: la})).To(Succeed())

		// Visible inside n, and only there.
		Expect(n.Do(func() error {
			_, err := netlink.LinkByName("probe0")
			return err
		})).To(Succeed())
		other := testutil.NewNS()
		Expect(other.Do(func() error {
			_, err := netlink.LinkByName("probe0")
			return err
		})).To(HaveOccurred())
	})
})
