package tuning

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/owner"
)

func (t *tuner) add(a *attach.Attachment, c *netConf) (types.Result, error) {
	if err := checkAllowlist(t.allowlist, c.sysctls); err != nil {
		return nil, err
	}
	res := a.Prev
	if len(c.sysctls) == 0 && !c.changesLink() {
		return res, nil
	}
	contNS, contH, err := a.Container()
	if err != nil {
		return nil, err
	}
	var link netlink.Link
	if c.changesLink() {
		if link, err = ip.LinkByName(contH, a.Args.IfName); err != nil {
			return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
		}
	}

	// Everything is read before anything changes: the state file must
	// hold the values from before this ADD.
	old, err := readSysctls(contNS, c.sysctls)
	if err != nil {
		return nil, err
	}
	// now is what this ADD's undo restores; st what the state file keeps
	// for DEL.
	now := snapshot(c, link, old)
	st := now
	p := statePath(c.DataDir, a.Args.ContainerID, a.Args.IfName)
	// An ADD over a live attachment (a main plugin whose ADD answers
	// again, such as Calico's) finds its state file: the values in it are
	// from before the first ADD, and the ones read now are tuned. They
	// stay; only what this ADD tunes anew is added. Its undo puts the file
	// back as it was, not away: DEL still needs it.
	earlier, err := readState(p)
	if err != nil {
		a.Log.Warn("state file unreadable: replaced", "err", err)
		earlier = nil
	}
	if earlier != nil && (earlier.Network == "" || earlier.Network == c.Name) {
		st = earlier.keepOver(now)
		a.Undo.Push("restore "+p, func() error { return writeState(p, earlier) })
	} else {
		a.Undo.Push("remove "+p, func() error { return removeState(p) })
	}
	if err := writeState(p, st); err != nil {
		return nil, err
	}
	if err := a.Step(StepState); err != nil {
		return nil, err
	}

	for _, s := range c.sysctls {
		if err := writeSysctlWith(contNS, t.setSysctl, s.Path, s.Value); err != nil {
			return nil, err
		}
		was := old[s.Path]
		a.Undo.Push("restore sysctl "+s.Path, func() error { return writeSysctl(contNS, s.Path, was) })
	}
	if err := a.Step(StepSysctl); err != nil {
		return nil, err
	}

	if link != nil {
		restore := func() error { return restoreLink(contH, a.Args.IfName, now) }
		a.Undo.Push("restore link "+a.Args.IfName, restore)
		if err := applyLink(contH, link, c); err != nil {
			return nil, fmt.Errorf("%q in %s: %w", a.Args.IfName, contNS.Path(), err)
		}
		if err := a.Step(StepLink); err != nil {
			return nil, err
		}
	}
	if c.mac != nil {
		for _, iface := range res.Interfaces {
			if iface.Name == a.Args.IfName && iface.Sandbox != "" {
				iface.Mac = c.mac.String()
			}
		}
	}
	return res, nil
}

// snapshot is the state before ADD: the link's current values of the
// attributes c changes, and the old sysctl values.
func snapshot(c *netConf, link netlink.Link, sysctls map[string]string) *state {
	st := &state{Network: c.Name}
	if len(sysctls) > 0 {
		st.SysCtl = sysctls
	}
	if link == nil {
		return st
	}
	la := link.Attrs()
	if c.mac != nil {
		st.Mac = la.HardwareAddr.String()
	}
	if c.Mtu != 0 {
		st.Mtu = la.MTU
	}
	if c.Promisc {
		on := la.Promisc != 0
		st.Promisc = &on
	}
	if c.Allmulti != nil {
		on := la.Allmulti != 0
		st.Allmulti = &on
	}
	if c.TxQLen != nil {
		q := la.TxQLen
		st.TxQLen = &q
	}
	return st
}

// applyLink sets the link attributes c configures, in upstream's order.
func applyLink(h *netlink.Handle, link netlink.Link, c *netConf) error {
	if c.Mtu != 0 {
		if err := h.LinkSetMTU(link, c.Mtu); err != nil {
			return fmt.Errorf("set mtu %d: %w", c.Mtu, err)
		}
	}
	if c.mac != nil {
		if err := h.LinkSetHardwareAddr(link, c.mac); err != nil {
			return fmt.Errorf("set mac %s: %w", c.mac, err)
		}
	}
	if c.Promisc {
		if err := h.SetPromiscOn(link); err != nil {
			return fmt.Errorf("set promisc on: %w", err)
		}
	}
	if c.Allmulti != nil {
		if err := setAllmulti(h, link, *c.Allmulti); err != nil {
			return err
		}
	}
	if c.TxQLen != nil {
		if err := h.LinkSetTxQLen(link, *c.TxQLen); err != nil {
			return fmt.Errorf("set txqueuelen %d: %w", *c.TxQLen, err)
		}
	}
	return nil
}

func setAllmulti(h *netlink.Handle, link netlink.Link, on bool) error {
	var err error
	if on {
		err = h.LinkSetAllmulticastOn(link)
	} else {
		err = h.LinkSetAllmulticastOff(link)
	}
	if err != nil {
		return fmt.Errorf("set allmulticast %v: %w", on, err)
	}
	return nil
}

// restoreLink puts back the link attributes st holds (upstream's order:
// MTU, MAC, promisc, allmulti, txqueuelen), each independently. A link
// that is gone has nothing to restore.
func restoreLink(h *netlink.Handle, ifName string, st *state) error {
	link, err := ip.LinkByName(h, ifName)
	if errors.Is(err, ip.ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	if st.Mtu != 0 {
		if err := h.LinkSetMTU(link, st.Mtu); err != nil {
			errs = append(errs, fmt.Errorf("restore mtu %d of %q: %w", st.Mtu, ifName, err))
		}
	}
	if st.Mac != "" {
		mac, err := net.ParseMAC(st.Mac)
		if err == nil {
			err = h.LinkSetHardwareAddr(link, mac)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("restore mac %s of %q: %w", st.Mac, ifName, err))
		}
	}
	if st.Promisc != nil {
		var err error
		if *st.Promisc {
			err = h.SetPromiscOn(link)
		} else {
			err = h.SetPromiscOff(link)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("restore promisc %v of %q: %w", *st.Promisc, ifName, err))
		}
	}
	if st.Allmulti != nil {
		if err := setAllmulti(h, link, *st.Allmulti); err != nil {
			errs = append(errs, fmt.Errorf("restore %q: %w", ifName, err))
		}
	}
	if st.TxQLen != nil {
		if err := h.LinkSetTxQLen(link, *st.TxQLen); err != nil {
			errs = append(errs, fmt.Errorf("restore txqueuelen %d of %q: %w", *st.TxQLen, ifName, err))
		}
	}
	return errors.Join(errs...)
}

// gc removes the state files of network c.Name that name no attachment in
// keep. Files without a network (upstream's) stay: dataDir may be shared
// by several networks, and such a file does not say which it belongs to.
func gc(a *attach.Attachment, c *netConf, keep []owner.Owner) []error {
	entries, err := os.ReadDir(c.DataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return []error{fmt.Errorf("gc: %w", err)}
	}
	kept := map[string]bool{}
	for _, o := range keep {
		kept[filepath.Base(statePath(c.DataDir, o.ContainerID, o.IfName))] = true
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		// A temp file (an ADD killed while writing the state) goes with
		// its attachment when it was written whole.
		target, isTmp := strings.CutPrefix(name, tmpPrefix)
		if e.IsDir() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(target, ".") || kept[target] {
			continue
		}
		p := filepath.Join(c.DataDir, name)
		st, err := readState(p)
		if err != nil || st == nil || st.Network != c.Name {
			continue // not ours to judge
		}
		a.Log.Info("gc: removing state file", "file", p)
		if isTmp {
			err = os.Remove(p)
		} else {
			err = removeState(p)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errs
}
