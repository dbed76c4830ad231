package tuning

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/owner"
	"github.com/cniforge/plugins/pkg/result"
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
	st := snapshot(c, link, old)
	p := statePath(c.DataDir, a.Args.ContainerID, a.Args.IfName)
	if err := writeState(p, st); err != nil {
		return nil, err
	}
	a.Undo.Push("remove "+p, func() error { return removeState(p) })
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
		restore := func() error { return restoreLink(contH, a.Args.IfName, st) }
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

// readSysctls reads the current value of each sysctl in the container. A
// key the kernel does not have is a config error (code 7) naming it.
func readSysctls(contNS *ns.NetNS, sysctls []sysctl) (map[string]string, error) {
	old := map[string]string{}
	if len(sysctls) == 0 {
		return old, nil
	}
	err := contNS.Do(func() error {
		for _, s := range sysctls {
			v, err := ip.GetSysctl(s.Path)
			if errors.Is(err, fs.ErrNotExist) {
				return result.InvalidConfig(fmt.Errorf("sysctl: %q: no /proc/sys/%s in %s", s.Key, s.Path, contNS.Path()))
			}
			if err != nil {
				return fmt.Errorf("in %s: %w", contNS.Path(), err)
			}
			old[s.Path] = v
		}
		return nil
	})
	return old, err
}

// writeSysctl writes value to /proc/sys/<p> in the container namespace:
// /proc/sys/net is the namespace of the thread that opens it.
func writeSysctl(contNS *ns.NetNS, p, value string) error {
	return writeSysctlWith(contNS, ip.SetSysctl, p, value)
}

// writeSysctlWith is writeSysctl writing with set.
func writeSysctlWith(contNS *ns.NetNS, set func(p, value string) error, p, value string) error {
	return contNS.Do(func() error {
		if err := set(p, value); err != nil {
			if errors.Is(err, unix.EINVAL) {
				// The kernel is the only judge of a sysctl's values.
				return result.InvalidConfig(fmt.Errorf("sysctl: the kernel refuses %q for %s in %s: %w", value, p, contNS.Path(), err))
			}
			return fmt.Errorf("in %s: %w", contNS.Path(), err)
		}
		return nil
	})
}

// checkAllowlist refuses (code 7) a sysctl key that matches no line of
// the allowlist file, when that file exists. Each non-empty line is a
// regular expression matched, as upstream matches it, anywhere in the key
// as configured (IFNAME unreplaced).
func checkAllowlist(file string, sysctls []sysctl) error {
	if len(sysctls) == 0 {
		return nil
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sysctl allowlist: %w", err)
	}
	var allow []*regexp.Regexp
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		re, err := regexp.Compile(line)
		if err != nil {
			return result.InvalidConfig(fmt.Errorf("sysctl allowlist %s line %d: %w", file, n, err))
		}
		allow = append(allow, re)
	}
	for _, s := range sysctls {
		ok := false
		for _, re := range allow {
			if re.MatchString(s.Key) {
				ok = true
				break
			}
		}
		if !ok {
			return result.InvalidConfig(fmt.Errorf("sysctl: %q matches no line of the allowlist %s", s.Key, file))
		}
	}
	return nil
}

// del restores what the state file holds and removes it. Without the
// namespace, or without the link, there is nothing to restore: it only
// removes the file. A restore that fails keeps the file for the retry.
func del(a *attach.Attachment, c *netConf) []error {
	p := statePath(c.DataDir, a.Args.ContainerID, a.Args.IfName)
	st, err := readState(p)
	if err != nil {
		// A file no suite can read restores nothing: dropping it is all
		// DEL can do, and keeping it would fail every retry.
		a.Log.Warn("dropping unreadable state file", "file", p, "err", err)
		return []error{removeState(p)}
	}
	if st == nil {
		// An ADD killed between writing the temp file and renaming it:
		// the temp file, when whole, is the state (issue 14).
		if st, err = readState(tmpPath(p)); err != nil || st == nil {
			return []error{removeState(p)}
		}
	}
	if a.Args.Netns == "" {
		return []error{removeState(p)}
	}
	contNS, err := ns.Open(a.Args.Netns)
	if err != nil {
		return []error{removeState(p)} // the namespace is gone, and what was in it
	}
	defer contNS.Close()
	h, err := contNS.Handle()
	if err != nil {
		return []error{fmt.Errorf("in %s: %w", contNS.Path(), err)}
	}
	defer h.Close()
	var errs []error
	if err := restoreLink(h, a.Args.IfName, st); err != nil {
		errs = append(errs, fmt.Errorf("in %s: %w", contNS.Path(), err))
	}
	for _, k := range sortedKeys(st.SysCtl) {
		if !validStatePath(k) {
			continue // not a sysctl we would have written
		}
		if err := writeSysctl(contNS, k, st.SysCtl[k]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return []error{removeState(p)}
}

// validStatePath reports whether a sysctl path read from a state file
// stays under /proc/sys/net: the file is input too.
func validStatePath(p string) bool {
	clean := filepath.Clean("/" + p)
	return strings.HasPrefix(clean, "/net/") && clean[1:] == p
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// check compares every configured value with the container.
func check(a *attach.Attachment, c *netConf, _ *current.Result) error {
	contNS, contH, err := a.Container()
	if err != nil {
		return err
	}
	now, err := readSysctls(contNS, c.sysctls)
	if err != nil {
		return err
	}
	for _, s := range c.sysctls {
		if now[s.Path] != strings.TrimSpace(s.Value) {
			return fmt.Errorf("sysctl %q in %s is %q, configured %q", s.Key, contNS.Path(), now[s.Path], s.Value)
		}
	}
	if !c.changesLink() {
		return nil
	}
	link, err := ip.LinkByName(contH, a.Args.IfName)
	if err != nil {
		return fmt.Errorf("in %s: %w", contNS.Path(), err)
	}
	la := link.Attrs()
	where := fmt.Sprintf("%q in %s", a.Args.IfName, contNS.Path())
	if c.mac != nil && !bytes.Equal(la.HardwareAddr, c.mac) {
		return fmt.Errorf("mac of %s is %s, configured %s", where, la.HardwareAddr, c.mac)
	}
	if c.Mtu != 0 && la.MTU != c.Mtu {
		return fmt.Errorf("mtu of %s is %d, configured %d", where, la.MTU, c.Mtu)
	}
	if c.Promisc && la.Promisc == 0 {
		return fmt.Errorf("promisc of %s is off, configured on", where)
	}
	if c.Allmulti != nil && (la.Allmulti != 0) != *c.Allmulti {
		return fmt.Errorf("allmulti of %s is %v, configured %v", where, la.Allmulti != 0, *c.Allmulti)
	}
	if c.TxQLen != nil && la.TxQLen != *c.TxQLen {
		return fmt.Errorf("txQLen of %s is %d, configured %d", where, la.TxQLen, *c.TxQLen)
	}
	return nil
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
