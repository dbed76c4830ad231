package attach

import (
	"context"
	"errors"
	"fmt"
	"os"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/result"
)

func (r *runner[C]) add(a *Attachment, c C) (err error) {
	// It runs before run closes the attachment: the undos still have the
	// namespaces. A panic is recovered first, then undone like an error.
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v, a.Log)
		}
		if err != nil {
			a.Undo.Run(a.Log) // a panicking undo step is an error of its own there
		}
	}()
	if r.p.Chained {
		if a.Prev, err = a.Conf.RequirePrev(fmt.Sprintf("prevResult: missing (%s is a chained plugin: it adjusts the interface a plugin before it in the conflist made)", r.p.Name)); err != nil {
			return err
		}
	}
	if err := findIPAM(a, a.Args.Path); err != nil {
		return err
	}
	if a.delegates() {
		// Its start overlaps the steps before IPAMAdd; it acts only then.
		ctx, cancel, _ := a.ipam.Prestart(context.TODO(), a.Conf.IPAM.Type, "ADD")
		defer cancel()
		a.ipamCtx = ctx
	}
	if _, _, err := a.Container(); err != nil {
		return err
	}
	if r.p.Chained {
		if err := chainedIface(a, a.Prev); err != nil {
			return err
		}
	}
	res, err := r.p.Add(a, c)
	if err != nil {
		return err
	}
	return result.Print(res, a.Conf.CNIVersion)
}

// chainedIface refuses (code 7), before a chained plugin changes anything,
// an attachment whose interface is not there to adjust: prevResult puts
// CNI_IFNAME in another sandbox than CNI_NETNS, or CNI_NETNS has no link
// of that name. Without it the plugin fails half-way with "link not found"
// (code 999), as upstream's do.
func chainedIface(a *Attachment, prev *current.Result) error {
	name, netns := a.Args.IfName, a.Args.Netns
	elsewhere := ""
	var ifaces []*current.Interface
	if prev != nil {
		ifaces = prev.Interfaces
	}
	for _, iface := range ifaces {
		if iface.Name != name || iface.Sandbox == "" {
			continue
		}
		if iface.Sandbox == netns || sameFile(iface.Sandbox, netns) {
			elsewhere = ""
			break
		}
		elsewhere = iface.Sandbox
	}
	if elsewhere != "" {
		return result.InvalidConfig(fmt.Errorf("prevResult: interface %q is in sandbox %q, not in CNI_NETNS %q", name, elsewhere, netns))
	}
	_, h, err := a.Container()
	if err != nil {
		return err
	}
	if _, err := h.LinkByName(name); err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return result.InvalidConfig(fmt.Errorf("CNI_IFNAME: no interface %q in CNI_NETNS %s to adjust (prevResult names the interface a plugin before this one made)", name, netns))
		}
		return fmt.Errorf("look up %q in %s: %w", name, netns, err)
	}
	return nil
}

// findIPAM refuses, before any change, an IPAM type that is not in
// CNI_PATH: a config problem (code 7), not an internal error.
func findIPAM(a *Attachment, cniPath string) error {
	if !a.delegates() {
		return nil
	}
	return a.ipam.Find(a.Conf.IPAM.Type, cniPath)
}

// sameFile reports whether paths a and b name one file (one namespace):
// a main plugin may spell CNI_NETNS otherwise in its result (a link to
// it, /proc/<pid>/ns/net of a process inside). A path that cannot be read
// is not shown to be the same.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
