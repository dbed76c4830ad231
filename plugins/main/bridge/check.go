package bridge

import (
	"errors"
	"fmt"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/attach/masquerade"
	"github.com/cniforge/plugins/pkg/netfilter/macspoof"
	"github.com/cniforge/plugins/pkg/result"
)

// check compares the kernel with the prevResult ADD returned, after the
// frame ran IPAM's CHECK: the bridge, both veth ends and how they are
// linked, the container's MAC, addresses and routes, and the masquerade
// and MAC spoof-check rules.
func check(fa *attach.Attachment, conf *config, prev *current.Result) error {
	a, err := wrap(fa, conf, true)
	if err != nil {
		return err
	}
	return a.check(prev)
}

func (a *attachment) check(prev *current.Result) error {
	conf, args := a.conf, a.args
	contIdx := result.InterfaceIndex(prev, args.IfName, args.Netns)
	if contIdx < 0 {
		return fmt.Errorf("prevResult: no interface %q in sandbox %s", args.IfName, args.Netns)
	}
	brIdx := result.InterfaceIndex(prev, conf.Bridge, "")
	if brIdx < 0 {
		return fmt.Errorf("prevResult: no bridge %q", conf.Bridge)
	}
	// bridge's own result lists the bridge, the host veth, then the
	// container end; chained plugins append theirs (bandwidth its ifb), so
	// the host veth is the first host-side interface after the bridge.
	hostIdx := -1
	for i := brIdx + 1; i < len(prev.Interfaces) && hostIdx < 0; i++ {
		if prev.Interfaces[i].Sandbox == "" {
			hostIdx = i
		}
	}
	if hostIdx < 0 {
		return errors.New("prevResult: no host veth interface")
	}

	br, err := attach.CheckLink(a.hostNS, a.hostH, conf.Bridge, "bridge", false)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	// The bridge's MAC is not compared: a bridge whose MAC nobody set
	// follows its lowest port's, so it changes as other containers come and
	// go without anything being wrong with this attachment.
	hostName := prev.Interfaces[hostIdx].Name
	hostVeth, err := attach.CheckLink(a.hostNS, a.hostH, hostName, "veth", false)
	if err != nil {
		return fmt.Errorf("host veth: %w", err)
	}
	if err := attach.CheckMaster(a.hostNS, hostVeth, br); err != nil {
		return err
	}
	contLink, err := attach.CheckLink(a.contNS, a.contH, args.IfName, "veth", false)
	if err != nil {
		return err
	}
	if err := attach.CheckMAC(a.contNS, contLink, prev.Interfaces[contIdx].Mac); err != nil {
		return err
	}
	if err := attach.CheckPeers(a.contNS, contLink, a.hostNS, hostVeth); err != nil {
		return err
	}

	want := result.IPsOf(prev, contIdx)
	if err := attach.CheckAddrs(a.contNS, a.contH, contLink, want); err != nil {
		return err
	}
	if err := attach.CheckRoutes(a.contNS, a.contH, contLink, prev.Routes); err != nil {
		return err
	}
	if err := masquerade.Check(a.Attachment, &conf.Masq, want); err != nil {
		return err
	}
	if conf.MacSpoofChk {
		sc := macspoof.MacSpoofCheck{Owner: a.Owner(), Port: hostName, MAC: contLink.Attrs().HardwareAddr}
		if err := sc.Check(); err != nil {
			return err
		}
	}
	return nil
}
