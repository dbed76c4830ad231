// Package portmap is the portmap plugin: it forwards host ports to a
// container (runtimeConfig.portMappings, capability "portMappings"). It
// only works chained after a plugin that made the attachment: the
// container's addresses come from prevResult, which ADD requires (code 7).
// With no mappings, ADD, DEL and CHECK touch no netfilter state and exec
// nothing: ADD passes prevResult through.
//
// It runs on the frame in pkg/attach; the rules are pkg/netfilter's
// PortMap (iptables or nftables, upstream's layout). ADD, in order (each
// step pushes its undo; a failure or panic runs them in reverse; over a
// live attachment the undo puts back the forwards that were there):
//
//	netfilter   DNAT for traffic to the host's own addresses, masquerade
//	            for hairpin traffic (from the container's subnet) and
//	            localhost traffic (snat); iptables: one transaction per
//	            family; nftables: one for both, or batches that a failed
//	            later one undoes (past about 500 mappings)
//	localnet    with snat and an IPv4 address: route_localnet=1 on the
//	            host interface that routes to the container, so that
//	            127.0.0.1:hostPort works from the host (the guard in the
//	            rules keeps neighbours' packets to 127.0.0.0/8 out);
//	            skipped, as upstream, when no host interface routes there
//	conntrack   flush the UDP conntrack entries of the mapped host ports,
//	            so that a flow that started before ADD is forwarded now
//
// DEL removes the attachment's forwards from both backends (whichever
// made them, upstream's included) and flushes the conntrack entries
// DNATed to the container's addresses (upstream does not: its issue
// #1190). GC removes the forwards of attachments not listed, on both
// backends. STATUS fails with code 50 when the configured backend cannot
// be used here.
package portmap

import (
	"errors"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/hostport"
	"github.com/cniforge/plugins/pkg/netfilter/hostport/backends"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/result"
)

// The steps of ADD, in order, as passed to attach.Hooks.AfterStep.
const (
	StepNetfilter = "netfilter"
	StepLocalnet  = "localnet"
	StepConntrack = "conntrack"
)

// AddSteps lists the steps of ADD in the order they run.
var AddSteps = []string{StepNetfilter, StepLocalnet, StepConntrack}

var frame = attach.Plugin[*netConf]{
	Name:    "portmap",
	Summary: "forwards host ports to a container (chained)",
	Parse:   parse,
	Add:     add,
	Lenient: parseLenient,
	Del:     del,
	Check:   check,
	GC:      gc,
	Status:  status,
}

// New returns the portmap plugin's descriptor running with hooks.
func New(hooks attach.Hooks) plugin.Plugin { return frame.Descriptor(hooks) }

// Plugin is the portmap plugin's descriptor.
var Plugin = New(attach.Hooks{})

// owner is the attachment's netfilter owner; portmap's rules are per
// network and container, as upstream's.
func owner(a *attach.Attachment) netfilter.Owner {
	return netfilter.Owner{Network: a.Conf.Name, ContainerID: a.Args.ContainerID}
}

func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	if c.markMasqBitUnused {
		a.Log.Info("markMasqBit unused: the nftables backend masquerades without a mark bit, as upstream's ignores it", "markMasqBit", *c.MarkMasqBit)
	}
	prev, err := a.Conf.RequirePrev("prevResult: missing (portmap must be chained after a plugin that made the attachment)")
	if err != nil {
		return nil, err
	}
	if len(c.mappings) == 0 {
		return prev, nil
	}
	ips := containerIPs(prev)
	if len(ips) == 0 {
		return nil, result.InvalidConfig(errors.New("prevResult: no container address to forward the ports to"))
	}
	pm, err := backends.NewPortMap(c.backend)
	if err != nil {
		return nil, result.InvalidConfig(err)
	}
	opts := c.options(owner(a), ips)
	// The undo puts back what was there: an ADD over a live attachment
	// (check --repair, podman's network reload, a second ADD) must not
	// take a running pod's forwards away when a later step fails.
	undo, err := pm.SetupUndoable(opts)
	if err != nil {
		return nil, fmt.Errorf("port forwards (%s): %w", pm.Backend(), err)
	}
	a.Undo.Push("restore port forwards", undo)
	if err := a.Step(StepNetfilter); err != nil {
		return nil, err
	}
	if opts.SNAT {
		if err := enableLocalnet(a, ips); err != nil {
			return nil, err
		}
	}
	if err := a.Step(StepLocalnet); err != nil {
		return nil, err
	}
	if err := flushUDPPorts(a, c.mappings); err != nil {
		return nil, err
	}
	if err := a.Step(StepConntrack); err != nil {
		return nil, err
	}
	return prev, nil
}

// containerIPs returns prevResult's addresses on container interfaces (or
// on no interface in particular), in order, with their prefix lengths.
func containerIPs(prev *current.Result) []net.IPNet {
	var out []net.IPNet
	for _, ipc := range prev.IPs {
		if ipc.Interface != nil && *ipc.Interface >= 0 && *ipc.Interface < len(prev.Interfaces) &&
			prev.Interfaces[*ipc.Interface].Sandbox == "" {
			continue // a host-side address
		}
		out = append(out, ipc.Address)
	}
	return out
}

// enableLocalnet sets route_localnet=1 on the host interface that routes
// to the container's first IPv4 address, and pushes the restore of the
// old value.
func enableLocalnet(a *attach.Attachment, ips []net.IPNet) error {
	var v4 net.IP
	for _, x := range ips {
		if x.IP.To4() != nil {
			v4 = x.IP
			break
		}
	}
	if v4 == nil {
		return nil // route_localnet is IPv4 only
	}
	_, h, err := a.Host()
	if err != nil {
		return err
	}
	routes, err := h.RouteGet(v4)
	if errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH) || err == nil && (len(routes) == 0 || routes[0].LinkIndex == 0) {
		// The host cannot route to the container yet (a main plugin
		// that routes later, another node agent): as upstream, skip
		// this step. Every path but 127.0.0.1:hostPort from the host
		// works without it.
		a.Log.Info("no host interface routes to the container: route_localnet left alone", "addr", v4.String())
		return nil
	}
	if err != nil {
		return fmt.Errorf("find the host interface routing to %s: %w", v4, err)
	}
	link, err := h.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return fmt.Errorf("find the host interface routing to %s: %w", v4, err)
	}
	name := "net/ipv4/conf/" + link.Attrs().Name + "/route_localnet"
	old, err := ip.GetSysctl(name)
	if err != nil {
		return err
	}
	if old == "1" {
		return nil
	}
	if err := ip.SetSysctl(name, "1"); err != nil {
		return err
	}
	a.Undo.Push("restore "+name, func() error { return ip.SetSysctl(name, old) })
	return nil
}

// withConntrack runs flush with a conntrack handle in the plugin's host
// namespace (the attachment's handles speak rtnetlink only), closed after.
func withConntrack(a *attach.Attachment, flush func(h *netlink.Handle) error) error {
	hostNS, _, err := a.Host()
	if err != nil {
		return err
	}
	h, err := hostNS.NetfilterHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	return flush(h)
}

// flushUDPPorts deletes the UDP conntrack entries to the mapped host
// ports: a flow that started before ADD would otherwise keep its old
// (un-NATed) entry and never reach the container.
func flushUDPPorts(a *attach.Attachment, ms []hostport.PortMapping) error {
	var filters []netlink.CustomConntrackFilter
	for _, m := range ms {
		if m.Protocol != "udp" {
			continue
		}
		f := &netlink.ConntrackFilter{}
		if err := f.AddProtocol(unix.IPPROTO_UDP); err != nil {
			return err
		}
		if err := f.AddPort(netlink.ConntrackOrigDstPort, uint16(m.HostPort)); err != nil {
			return err
		}
		filters = append(filters, f)
	}
	if len(filters) == 0 {
		return nil
	}
	return withConntrack(a, func(h *netlink.Handle) error {
		var errs []error
		for _, fam := range []netlink.InetFamily{unix.AF_INET, unix.AF_INET6} {
			if _, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, fam, filters...); err != nil {
				errs = append(errs, fmt.Errorf("flush UDP conntrack entries of the host ports: %w", err))
			}
		}
		return errors.Join(errs...)
	})
}

// flushTo deletes the conntrack entries whose reply comes from one of ips:
// the connections DNATed to the container.
func flushTo(a *attach.Attachment, ips []net.IP) error {
	if len(ips) == 0 {
		return nil
	}
	return withConntrack(a, func(h *netlink.Handle) error { return flushReplies(h, ips) })
}

// flushReplies deletes, through h, the conntrack entries whose reply comes
// from one of ips.
func flushReplies(h *netlink.Handle, ips []net.IP) error {
	var errs []error
	for _, x := range ips {
		f := &netlink.ConntrackFilter{}
		if err := f.AddIP(netlink.ConntrackReplySrcIP, x); err != nil {
			return err
		}
		fam := netlink.InetFamily(unix.AF_INET6)
		if x.To4() != nil {
			fam = unix.AF_INET
		}
		if _, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, fam, f); err != nil {
			errs = append(errs, fmt.Errorf("flush conntrack entries DNATed to %s: %w", x, err))
		}
	}
	return errors.Join(errs...)
}

// TeardownOwner removes every forward that container id holds on network,
// on both backends (ours or upstream's, found by owner alone), and the
// conntrack entries DNATed to the addresses those forwards pointed at. It
// serves a DEL that cannot carry the mappings: cniforge gc releasing a
// reservation whose pod left no cache entry, so no runtime config. A plain
// DEL without portMappings touches nothing (see del). It works in the
// calling thread's netns, the host's.
func TeardownOwner(network, id string) error {
	ips, err := backends.TeardownPortMapAllOf(netfilter.Owner{Network: network, ContainerID: id}, nil)
	if err != nil {
		return fmt.Errorf("port forwards of %q on %q: %w", id, network, err)
	}
	if len(ips) == 0 {
		return nil
	}
	h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("conntrack: %w", err)
	}
	defer h.Close()
	return flushReplies(h, ips)
}

func del(a *attach.Attachment, c *netConf) []error {
	// PortMaps, not mappings: a lenient parse leaves out a mapping that no
	// longer validates, whose forwards are found by owner all the same.
	if len(c.RuntimeConfig.PortMaps) == 0 {
		return nil
	}
	ips, err := backends.TeardownPortMapAllOf(owner(a), c.mappings)
	if err != nil {
		err = fmt.Errorf("port forwards: %w", err)
	}
	return []error{err, flushTo(a, ips)}
}

func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	if len(c.mappings) == 0 {
		return nil
	}
	pm, err := backends.NewPortMap(c.backend)
	if err != nil {
		return result.InvalidConfig(err)
	}
	return pm.Check(c.options(owner(a), containerIPs(prev)))
}

func gc(a *attach.Attachment, c *netConf, keep []netfilter.Owner) []error {
	if err := backends.GCPortMapAll(c.Name, keep); err != nil {
		return []error{fmt.Errorf("port forwards GC: %w", err)}
	}
	return nil
}

func status(a *attach.Attachment, c *netConf) error {
	pm, err := backends.NewPortMap(c.backend)
	if err != nil {
		return result.InvalidConfig(err)
	}
	if err := pm.Usable(); err != nil {
		return result.Unavailable(fmt.Errorf("backend %s: %w", pm.Backend(), err))
	}
	return nil
}
