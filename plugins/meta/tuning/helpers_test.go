package tuning_test

import (
	"net"

	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// linkSetter changes eth0 behind the plugin's back, as drift would.
type linkSetter struct {
	h *netlink.Handle
	l netlink.Link
}

func (s linkSetter) mtu(v int) error { return s.h.LinkSetMTU(s.l, v) }
func (s linkSetter) mac(v string) error {
	m, err := net.ParseMAC(v)
	if err != nil {
		return err
	}
	return s.h.LinkSetHardwareAddr(s.l, m)
}
func (s linkSetter) promisc(on bool) error {
	if on {
		return s.h.SetPromiscOn(s.l)
	}
	return s.h.SetPromiscOff(s.l)
}
func (s linkSetter) allmulti(on bool) error {
	if on {
		return s.h.LinkSetAllmulticastOn(s.l)
	}
	return s.h.LinkSetAllmulticastOff(s.l)
}
func (s linkSetter) txqlen(v int) error { return s.h.LinkSetTxQLen(s.l, v) }

func linkSet(n *ns.NetNS, fn func(linkSetter) error) {
	h := testutil.Handle(n)
	l, err := h.LinkByName("eth0")
	Expect(err).NotTo(HaveOccurred())
	Expect(fn(linkSetter{h: h, l: l})).To(Succeed())
}
