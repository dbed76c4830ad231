package attach

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/owner"
	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/rollback"
)

// Attachment is what one command works on: the CNI arguments, the common
// config, a logger, the host namespace (the plugin thread's) and, opened on
// demand, the container namespace, each with a netlink handle bound to it.
type Attachment struct {
	Args *skel.CmdArgs
	Conf *NetConf
	Log  *slog.Logger
	// Undo is ADD's undo stack: push the undo of each change right after
	// it succeeded. The runner runs it in reverse when ADD fails or panics.
	Undo rollback.Stack
	// Prev is ADD's prevResult, converted to the current version, for a
	// chained plugin (Plugin.Chained); nil otherwise.
	Prev *current.Result

	hostNS *ns.NetNS
	hostH  *netlink.Handle
	contNS *ns.NetNS
	contH  *netlink.Handle
	hooks  Hooks
	// ipam is the plugin's IPAM delegation (Plugin.IPAM), nil for a
	// plugin that takes no addresses from an IPAM plugin.
	ipam IPAM
	// ipamCtx carries ADD's IPAM delegate, started when ADD starts so
	// that its process start overlaps the plugin's first steps (see
	// IPAM.Prestart); nil: none was started.
	ipamCtx context.Context
}

func newAttachment(args *skel.CmdArgs, conf *NetConf, hooks Hooks, log *slog.Logger, ipam IPAM) *Attachment {
	return &Attachment{Args: args, Conf: conf, Log: log, hooks: hooks, ipam: ipam}
}

// delegates says whether the command delegates to an IPAM plugin: the
// plugin takes its addresses from one (Plugin.IPAM) and the config names
// one. A plugin without IPAM ignores an "ipam" key, as upstream's
// loopback, tuning, sbr, vrf, bandwidth, portmap and firewall do.
func (a *Attachment) delegates() bool { return a.ipam != nil && a.Conf.HasIPAM() }

// Host returns the plugin's host namespace (the calling thread's; see
// pkg/ns) and a netlink handle bound to it, opening them on first use.
func (a *Attachment) Host() (*ns.NetNS, *netlink.Handle, error) {
	n, err := a.hostNetNS()
	if err != nil {
		return nil, nil, err
	}
	if a.hostH == nil {
		h, err := ns.HostHandle()
		if err != nil {
			return nil, nil, err
		}
		a.hostH = h
	}
	return n, a.hostH, nil
}

// hostNetNS is the host namespace without a netlink handle: telling the
// container's namespace from the host's needs no socket (loopback, and
// every plugin that only works in the container, opens none in the host).
func (a *Attachment) hostNetNS() (*ns.NetNS, error) {
	if a.hostNS == nil {
		n, err := ns.Current()
		if err != nil {
			return nil, fmt.Errorf("open host netns: %w", err)
		}
		a.hostNS = n
	}
	return a.hostNS, nil
}

// Container returns the namespace CNI_NETNS names and a netlink handle
// bound to it, opening them on first use. It refuses (code 8, naming both
// paths) a CNI_NETNS that is the plugin's own namespace: every change made
// "in the container" would land in the host. Missing: code 4; not a
// network namespace: code 8.
func (a *Attachment) Container() (*ns.NetNS, *netlink.Handle, error) {
	if a.contNS != nil {
		return a.contNS, a.contH, nil
	}
	n, h, err := ns.OpenContainer(a.Args.Netns)
	if err != nil {
		return nil, nil, err
	}
	if err := a.refuseOwn(n); err != nil {
		h.Close()
		n.Close()
		return nil, nil, err
	}
	a.contNS, a.contH = n, h
	return n, h, nil
}

// ContainerLocked is Container with the namespace's lock (ns.NetNS.Lock)
// held until unlock: for an ADD that reads, then changes, state of the
// whole namespace (a free routing table, a VRF) that another command there
// must not change in between (sbr, vrf; their DEL takes the same lock with
// ns.OpenLocked).
func (a *Attachment) ContainerLocked() (n *ns.NetNS, h *netlink.Handle, unlock func(), err error) {
	if n, h, err = a.Container(); err != nil {
		return nil, nil, nil, err
	}
	if unlock, err = n.Lock(); err != nil {
		return nil, nil, nil, err
	}
	return n, h, unlock, nil
}

// refuseOwn is the own-namespace guard: code 8 when cont is the host
// namespace, unless the runtime set CNI_NETNS_OVERRIDE (as skel, which
// then skips its own check: the runtime means the plugin's namespace). It
// opens nothing in the host: a plugin that works only in the container
// (loopback) never needs the host namespace open.
func (a *Attachment) refuseOwn(cont *ns.NetNS) error {
	if o := strings.ToLower(a.Args.NetnsOverride); o == "1" || o == "true" {
		return nil
	}
	same, host, err := cont.IsOwn()
	if err != nil {
		return result.InvalidNetNS(fmt.Errorf("compare CNI_NETNS %s with the plugin's netns %s: %w", cont.Path(), host, err))
	}
	if same {
		return result.InvalidNetNS(fmt.Errorf("CNI_NETNS %s is the plugin's own network namespace (%s)", cont.Path(), host))
	}
	return nil
}

// guardDel refuses, before DEL changes anything, a CNI_NETNS that is the
// plugin's own namespace. A CNI_NETNS that cannot be opened passes: DEL's
// steps treat a namespace that is gone as "nothing to delete".
func (a *Attachment) guardDel() error {
	if a.Args.Netns == "" {
		return nil
	}
	n, err := ns.Open(a.Args.Netns)
	if err != nil {
		return nil // gone or not a namespace: see DeleteContainerVeth
	}
	defer n.Close()
	return a.refuseOwn(n)
}

// Close releases both namespaces and their handles.
func (a *Attachment) Close() {
	if a.contH != nil {
		a.contH.Close()
	}
	if a.contNS != nil {
		a.contNS.Close()
	}
	if a.hostH != nil {
		a.hostH.Close()
	}
	if a.hostNS != nil {
		a.hostNS.Close()
	}
	a.contNS, a.contH, a.hostNS, a.hostH = nil, nil, nil, nil
}

// Step marks the end of ADD step name. It returns the error the failure
// injection hook (Hooks.AfterStep) asks for, if any; ADD returns it as it
// would a kernel error, so tests see that everything made so far is undone.
func (a *Attachment) Step(name string) error {
	if a.hooks.AfterStep == nil {
		return nil
	}
	return a.hooks.AfterStep(name)
}

// Owner is the attachment's owner (of netfilter rules, ifbs, state
// files): network, container ID, ifname.
func (a *Attachment) Owner() owner.Owner {
	return owner.Owner{Network: a.Conf.Name, ContainerID: a.Args.ContainerID, IfName: a.Args.IfName}
}

// Alias is the alias both ends of the attachment's links carry, so DEL
// deletes only its own links (see ip.AttachmentAlias).
func (a *Attachment) Alias() string {
	return ip.AttachmentAlias(a.Args.ContainerID, a.Args.IfName)
}
