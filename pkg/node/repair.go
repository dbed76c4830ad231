package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/masq"
	"github.com/cniforge/plugins/pkg/ns"
)

// check --repair re-applies, for a plugin whose CHECK failed, what can be
// re-applied without re-making the container's interfaces: the masquerade
// rules of bridge and ptp (Setup is idempotent: present rules stay,
// missing ones are added), and the whole of portmap, firewall and
// bandwidth (rules, qdiscs, the ifb, all on the host): their ADD again,
// with the config and result cached at ADD, as libcni would send them. Everything
// else (a veth, an address, a main-table route, tuning's sysctls) is
// reported as not repairable: the pod must be made again.

// errNotRepairable marks a plugin whose drift check --repair leaves alone.
var errNotRepairable = errors.New("not repairable here: re-create the pod")

// rerunnable plugins change only the host: ADD again re-makes their part
// from the cached config and result and touches no container. ADD alone,
// never DEL first (issue 29): each one's ADD on an existing attachment is
// in place (present rules and qdiscs stay, missing ones are added, a chain
// rewritten is rewritten in one transaction), whereas portmap's DEL
// flushes the pod's conntrack entries, cutting every established
// connection through its host ports, and firewall's DEL leaves the pod
// without its ACCEPT rules until the ADD.
func rerunnable(t string) bool {
	switch t {
	case "portmap", "firewall", "bandwidth":
		return true
	}
	return false
}

// repairPlugin repairs plugin p of attachment rt on network list.
func repairPlugin(ctx context.Context, binDir string, list *libcni.NetworkConfigList, p *libcni.PluginConfig,
	rt *libcni.RuntimeConf, cached types.Result) error {
	switch t := p.Network.Type; {
	case t == "bridge" || t == "ptp":
		return repairMasq(list.Name, p, rt, cached)
	case t == "sbr":
		return repairSbr(p, rt, cached)
	case rerunnable(t):
		stdin, err := pluginStdin(list, p, rt, cached)
		if err != nil {
			return err
		}
		path := filepath.Join(binDir, t)
		if _, err := invoke.ExecPluginWithResult(ctx, path, stdin, pluginArgs("ADD", binDir, rt), nil); err != nil {
			return fmt.Errorf("ADD: %w", err)
		}
		return nil
	}
	return errNotRepairable
}

// repairSbr puts back sbr's policy rules (from each of the interface's
// cached addresses, looking up sbr's table) where they went missing. The
// table is the config's "table", or the one table besides the kernel's
// own that still holds routes through the interface (sbr moved them
// there). sbr's DEL then ADD cannot do it: without the rule DEL cannot
// tell which table to empty, and ADD then finds no route left to move.
// Routes missing from the table are not made up: CHECK still fails, and
// the pod must be made again.
func repairSbr(p *libcni.PluginConfig, rt *libcni.RuntimeConf, cached types.Result) error {
	var conf struct {
		Table *int `json:"table"`
	}
	if err := json.Unmarshal(p.Bytes, &conf); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	res, err := current.NewResultFromResult(cached)
	if err != nil {
		return fmt.Errorf("cached result: %w", err)
	}
	addrs := containerAddrs(res, rt.IfName)
	if len(addrs) == 0 {
		return errNotRepairable
	}
	contNS, err := ns.Open(rt.NetNS)
	if err != nil {
		return err
	}
	defer contNS.Close()
	h, err := contNS.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(rt.IfName)
	if err != nil {
		return fmt.Errorf("%q in %s: %w", rt.IfName, rt.NetNS, err)
	}
	table := 0
	if conf.Table != nil {
		table = *conf.Table
	} else {
		routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: link.Attrs().Index, Table: unix.RT_TABLE_UNSPEC},
			netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
		if err != nil {
			return fmt.Errorf("routes in %s: %w", rt.NetNS, err)
		}
		tables := map[int]bool{}
		for _, r := range routes {
			if r.Table != unix.RT_TABLE_MAIN && r.Table != unix.RT_TABLE_LOCAL && r.Table != unix.RT_TABLE_DEFAULT {
				tables[r.Table] = true
			}
		}
		if len(tables) != 1 {
			return fmt.Errorf("%w (%d tables besides the kernel's hold routes through %q)", errNotRepairable, len(tables), rt.IfName)
		}
		for t := range tables {
			table = t
		}
	}
	for _, a := range addrs {
		family, bits := netlink.FAMILY_V4, 32
		if a.IP.To4() == nil {
			family, bits = netlink.FAMILY_V6, 128
		}
		rules, err := h.RuleList(family)
		if err != nil {
			return fmt.Errorf("rules in %s: %w", rt.NetNS, err)
		}
		src := &net.IPNet{IP: a.IP, Mask: net.CIDRMask(bits, bits)}
		if slices.ContainsFunc(rules, func(r netlink.Rule) bool {
			return r.Table == table && r.Src != nil && r.Src.String() == src.String()
		}) {
			continue
		}
		r := netlink.NewRule()
		r.Src, r.Table, r.Family = src, table, family
		if err := h.RuleAdd(r); err != nil {
			return fmt.Errorf("add rule from %s lookup %d in %s: %w", src, table, rt.NetNS, err)
		}
	}
	return nil
}

// repairMasq installs the masquerade rules of a bridge or ptp attachment
// again, for the container interface's addresses in the cached result.
// It runs in this process's netns, the host's.
func repairMasq(network string, p *libcni.PluginConfig, rt *libcni.RuntimeConf, cached types.Result) error {
	var conf attach.Masq
	if err := json.Unmarshal(p.Bytes, &conf); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if !conf.IPMasq {
		return errNotRepairable // its drift is not in masquerade rules
	}
	res, err := current.NewResultFromResult(cached)
	if err != nil {
		return fmt.Errorf("cached result: %w", err)
	}
	// With the config's exclusions: Setup replaces the attachment's
	// rules, and without them it would drop them.
	masq, err := masq.NewMasq(conf.Backend(), conf.ExcludedCIDRs()...)
	if err != nil {
		return err
	}
	owner := netfilter.Owner{Network: network, ContainerID: rt.ContainerID, IfName: rt.IfName}
	if err := masq.Setup(owner, containerAddrs(res, rt.IfName)); err != nil {
		return fmt.Errorf("masquerade (%s): %w", masq.Backend(), err)
	}
	return nil
}

// containerAddrs are the addresses of the container interface ifName in
// res (the ones bridge and ptp masquerade); all of res's addresses when no
// interface says which.
func containerAddrs(res *current.Result, ifName string) []*net.IPNet {
	var out []*net.IPNet
	for _, ipc := range res.IPs {
		i := ipc.Interface
		if i == nil || *i < 0 || *i >= len(res.Interfaces) ||
			(res.Interfaces[*i].Name == ifName && res.Interfaces[*i].Sandbox != "") {
			out = append(out, &net.IPNet{IP: ipc.Address.IP, Mask: ipc.Address.Mask})
		}
	}
	return out
}

// pluginStdin is the config libcni sends plugin p of list for rt, with
// cached as prevResult: the list's name and cniVersion, and runtimeConfig
// holding the capability arguments p declares.
func pluginStdin(list *libcni.NetworkConfigList, p *libcni.PluginConfig, rt *libcni.RuntimeConf, cached types.Result) ([]byte, error) {
	prev, err := cached.GetAsVersion(list.CNIVersion)
	if err != nil {
		return nil, fmt.Errorf("cached result as %s: %w", list.CNIVersion, err)
	}
	inject := map[string]any{"name": list.Name, "cniVersion": list.CNIVersion, "prevResult": prev}
	rc := map[string]any{}
	for capability, on := range p.Network.Capabilities {
		if v, ok := rt.CapabilityArgs[capability]; on && ok {
			rc[capability] = v
		}
	}
	if len(rc) > 0 {
		inject["runtimeConfig"] = rc
	}
	c, err := libcni.InjectConf(p, inject)
	if err != nil {
		return nil, err
	}
	return c.Bytes, nil
}

func pluginArgs(cmd, binDir string, rt *libcni.RuntimeConf) *invoke.Args {
	var pairs []string
	for _, kv := range rt.Args {
		pairs = append(pairs, kv[0]+"="+kv[1])
	}
	return &invoke.Args{Command: cmd, ContainerID: rt.ContainerID, NetNS: rt.NetNS, IfName: rt.IfName,
		PluginArgsStr: strings.Join(pairs, ";"), Path: binDir}
}
