package tuning

import (
	"bytes"
	"fmt"
	"strings"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
)

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
