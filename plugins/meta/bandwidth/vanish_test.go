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
	h, host, fs := listedRedirect(t, "vanish")
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

// listedRedirect makes, in a fresh namespace, a veth <p>0 whose ingress
// hook redirects to an ifb bwp<p>, as bandwidth's ADD does, and returns
// the handle, the host end and its redirects as a DEL lists them.
func listedRedirect(t *testing.T, p string) (*netlink.Handle, netlink.Link, []netlink.Filter) {
	t.Helper()
	h := nsHandle(t)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p + "0"}, PeerName: p + "1"}
	ifb := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: "bwp" + p}}
	for _, l := range []netlink.Link{veth, ifb} {
		if err := h.LinkAdd(l); err != nil {
			t.Fatalf("add %s: %v", l.Attrs().Name, err)
		}
	}
	host, err := h.LinkByName(veth.Name)
	if err != nil {
		t.Fatal(err)
	}
	to, err := h.LinkByName(ifb.Name)
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
		t.Fatalf("redirects of %s: %v, %v; want the one added", veth.Name, fs, err)
	}
	return h, host, fs
}

// The same race for the qdiscs: deleteShaping lists the host end's qdiscs
// and deletes its root tbf, and the ingress hook's clsact goes after its
// filters; the link can vanish between the listing and either delete. A
// qdisc that went with its link is deleted, not "no such device".
func TestDeleteQdiscsOfAVanishedLink(t *testing.T) {
	h := nsHandle(t)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vanish0"}, PeerName: "vanish1"}); err != nil {
		t.Fatal(err)
	}
	host, err := h.LinkByName("vanish0")
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := tbfFor(1000000, 100000, netlink.TickInUsec())
	if err := h.QdiscAdd(tbf(host.Attrs().Index, p)); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureIngressHook(h, host); err != nil {
		t.Fatal(err)
	}
	root, err := rootQdisc(h, host)
	if err != nil || root == nil || !ownRoot(root) {
		t.Fatalf("root qdisc of vanish0: %v, %v; want the tbf added", root, err)
	}
	hook, err := ingressHookQdisc(h, host)
	if err != nil || hook == nil {
		t.Fatalf("ingress hook of vanish0: %v, %v; want the clsact added", hook, err)
	}
	if err := h.LinkDel(host); err != nil {
		t.Fatal(err)
	}
	for _, q := range []netlink.Qdisc{root, hook} {
		if err := qdiscDel(h, q); err != nil {
			t.Errorf("deleting the %s of a link that is gone: %v, want success", q.Type(), err)
		}
	}
}

// A qdisc deleted already (by an earlier DEL, or the undo of an ADD that
// raced one) is gone: its slot holds the kernel's default qdisc, handle 0,
// and a delete naming our handle gets "invalid argument", which is
// success, as "no such file" is for a link that never had the qdisc.
func TestDeleteQdiscsAlreadyGone(t *testing.T) {
	h := nsHandle(t)
	for _, name := range []string{"gone0", "never0"} {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
			t.Fatal(err)
		}
	}
	gone, err := h.LinkByName("gone0")
	if err != nil {
		t.Fatal(err)
	}
	never, err := h.LinkByName("never0")
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := tbfFor(1000000, 100000, netlink.TickInUsec())
	qdiscs := func(l netlink.Link) []netlink.Qdisc {
		return []netlink.Qdisc{
			tbf(l.Attrs().Index, p),
			&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: ingressHandle, Parent: netlink.HANDLE_INGRESS}},
		}
	}
	for _, q := range qdiscs(gone) {
		if err := h.QdiscAdd(q); err != nil {
			t.Fatal(err)
		}
		if err := h.QdiscDel(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []netlink.Link{gone, never} {
		for _, q := range qdiscs(l) {
			if err := qdiscDel(h, q); err != nil {
				t.Errorf("deleting a %s %s no longer has: %v, want success", q.Type(), l.Attrs().Name, err)
			}
		}
	}
}

// The same race one level down: a DEL lists the host end's redirects, then
// the ingress hook's clsact goes (another DEL or GC of the same
// attachment, or a tool clearing the link's qdiscs) with every filter on
// it, and the DEL's filter delete finds no parent: the kernel answers
// EINVAL, not ENOENT. The redirect is gone all the same, so the delete is
// success.
func TestDeleteRedirectsOfAVanishedHook(t *testing.T) {
	h, host, fs := listedRedirect(t, "hook")
	q, err := ingressHookQdisc(h, host)
	if err != nil || q == nil {
		t.Fatalf("clsact of hook0: %v, %v", q, err)
	}
	if err := h.QdiscDel(q); err != nil {
		t.Fatal(err)
	}
	if err := deleteFilters(h, host, fs); err != nil {
		t.Errorf("deleting the redirects of a hook that is gone: %v, want success", err)
	}
}

// nsHandle is a netlink handle in a fresh namespace, closed with the test.
func nsHandle(t *testing.T) *netlink.Handle {
	t.Helper()
	n, _ := testutil.NewTestNS(t)
	h, err := n.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}
