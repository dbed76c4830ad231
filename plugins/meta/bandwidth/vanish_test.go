package bandwidth

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/testutil"
)

// A DEL (or GC's DEL) can list the host end's redirects while the link is
// still there and delete them after it vanished: the container's netns
// gone, the kernel removes the veth pair asynchronously. Deleting the
// filters of a link that is gone is success, not "no such device" (the
// kill-and-GC spec of tests/killadd failed so once).
func TestDeleteRedirectsOfAVanishedLink(t *testing.T) {
	n, _ := testutil.NewTestNS(t)
	h, err := n.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vanish0"}, PeerName: "vanish1"}
	ifb := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: "bwpvanish"}}
	for _, l := range []netlink.Link{veth, ifb} {
		if err := h.LinkAdd(l); err != nil {
			t.Fatalf("add %s: %v", l.Attrs().Name, err)
		}
	}
	host, err := h.LinkByName("vanish0")
	if err != nil {
		t.Fatal(err)
	}
	to, err := h.LinkByName("bwpvanish")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ensureIngressHook(h, host); err != nil {
		t.Fatal(err)
	}
	if err := h.FilterAdd(redirect(host.Attrs().Index, to.Attrs().Index)); err != nil {
		t.Fatal(err)
	}
	fs, err := bandwidthRedirects(h, host)
	if err != nil || len(fs) != 1 {
		t.Fatalf("redirects of vanish0: %v, %v; want the one added", fs, err)
	}
	if err := h.LinkDel(host); err != nil {
		t.Fatal(err)
	}
	if err := deleteFilters(h, host, fs); err != nil {
		t.Errorf("deleting the redirects of a link that is gone: %v, want success", err)
	}
	if err := deleteIngressHookIfUnused(h, host); err != nil {
		t.Errorf("deleting the clsact of a link that is gone: %v, want success", err)
	}
}
