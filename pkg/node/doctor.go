package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/google/nftables"

	"github.com/cniforge/plugins/plugins/companion"
)

// Doctor reports what makes a node misbehave and is hard to see from a
// pod: plugins a conflist names that are missing or fail VERSION (Podman
// then drops the network without a word), CNI rules in both
// iptables-legacy and iptables-nft (the kernel runs both, in an order
// nobody chose), forwarding off, br_netfilter absent where a network's
// firewall rules need it, a range nearly full, plugins of ours at two
// versions (an install that left an older companion's). Each finding says
// what to do. It reads; it changes nothing. It looks at the network
// namespace it runs in: run it in the host's.

type finding struct {
	Network string `json:"network,omitempty"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// procSys holds the sysctls; those below net/ are the calling netns's own.
const procSys = "/proc/sys"

// Doctor prints its findings (those listed at the top of this file), as JSON
// when asJSON, and returns the exit status: 1 when it found something.
func Doctor(d *Dirs, asJSON bool, stdout, stderr io.Writer) int {
	st, err := loadNode(d)
	if err != nil {
		fmt.Fprintf(stderr, "cniforge doctor: %v\n", err)
		return 1
	}
	found := []finding{}
	if len(st.Networks) == 0 {
		found = append(found, finding{Problem: fmt.Sprintf("no network config in %s: containerd and CRI-O report the node's network not ready, and no pod starts", d.Conf),
			Fix: "write a .conflist there (docs/kubernetes.md has one), or point --conf-dir at the runtime's conf dir"})
	}
	for _, w := range st.Warnings {
		found = append(found, finding{Problem: w, Fix: "check what it names: runtimes skip a config they cannot read, and a wrong --cache-dir makes every reservation look unowned"})
	}
	found = append(found, pluginFindings(st, d.Bin)...)
	found = append(found, versionFindings(d.Bin)...)
	found = append(found, sysctlFindings(st)...)
	found = append(found, rangeFindings(st)...)
	found = append(found, iptablesFindings()...)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(found) // best effort: the exit status says the rest
	} else if len(found) == 0 {
		fmt.Fprintf(stdout, "no findings (%d network(s) in %s)\n", len(st.Networks), d.Conf)
	} else {
		for _, f := range found {
			where := ""
			if f.Network != "" {
				where = q(f.Network) + ": "
			}
			fmt.Fprintf(stdout, "%s%s\n    fix: %s\n", where, f.Problem, f.Fix)
		}
	}
	if len(found) > 0 {
		return 1
	}
	return 0
}

// pluginFindings: every plugin (and IPAM plugin) a network names must be
// in the bin dir and answer VERSION with the network's cniVersion.
func pluginFindings(st *nodeState, binDir string) []finding {
	var out []finding
	cni := libcni.NewCNIConfig([]string{binDir}, nil)
	asked := map[string]error{}
	for _, n := range st.Networks {
		for _, t := range pluginTypes(n.list) {
			err, seen := asked[t]
			if !seen {
				err = versionOf(cni, binDir, t, n.CNIVersion)
				asked[t] = err
			}
			var missing *missingPlugin
			switch {
			case err == nil:
			case errors.As(err, &missing):
				out = append(out, finding{Network: n.Name, Problem: fmt.Sprintf("plugin %q is not in %s", t, binDir),
					Fix: fmt.Sprintf("install it (cniforge install --dir %s); until then every ADD on this network fails, and Podman drops the network silently", binDir)})
			default:
				out = append(out, finding{Network: n.Name, Problem: fmt.Sprintf("plugin %q: %v", t, err),
					Fix: "replace the binary with one that answers VERSION; Podman drops a network whose plugin fails it"})
			}
		}
	}
	return out
}

type missingPlugin struct{ name string }

func (m *missingPlugin) Error() string { return m.name + " missing" }

// versionOf runs VERSION of plugin t and checks it supports cniVersion.
func versionOf(cni *libcni.CNIConfig, binDir, t, cniVersion string) error {
	if _, err := os.Stat(filepath.Join(binDir, t)); errors.Is(err, fs.ErrNotExist) {
		return &missingPlugin{t}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := cni.GetVersionInfo(ctx, t)
	if err != nil {
		return fmt.Errorf("VERSION failed: %w", err)
	}
	if cniVersion != "" && !slices.Contains(info.SupportedVersions(), cniVersion) {
		return fmt.Errorf("does not support cniVersion %s (it supports %s)", cniVersion, strings.Join(info.SupportedVersions(), ", "))
	}
	return nil
}

// pluginTypes are the plugin and IPAM types a network names, in order.
func pluginTypes(list *libcni.NetworkConfigList) []string {
	var out []string
	for _, p := range list.Plugins {
		for _, t := range []string{p.Network.Type, p.Network.IPAM.Type} {
			if t != "" && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

func hasPlugin(list *libcni.NetworkConfigList, t string) bool {
	return slices.Contains(pluginTypes(list), t)
}

// versionFindings: every plugin of cniforge's in binDir should be of one
// version. An install without a companion (cniforge-dhcp) leaves the one an
// earlier install put there, and the plugins linked to it, at its own
// version: those run that version's code for every pod, DEL and GC
// included. A plugin that is not cniforge's, or that does not say its
// version, is not judged here (pluginFindings asks the ones networks use).
func versionFindings(binDir string) []finding {
	ents, err := os.ReadDir(binDir)
	if err != nil {
		return nil // pluginFindings and the runtimes say what a missing bin dir means
	}
	byVersion := map[string][]string{}
	marked := map[string]bool{} // by resolved file: hasMark reads the whole binary
	for _, e := range ents {
		name := e.Name()
		if name == "cniforge" || slices.Contains(companion.Binaries(), name) || strings.HasPrefix(name, ".") {
			continue // the multicalls themselves run no plugin under their own name
		}
		path := filepath.Join(binDir, name)
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			continue
		}
		ours, seen := marked[real]
		if !seen {
			ours, _ = hasMark(real)
			marked[real] = ours
		}
		if !ours {
			continue
		}
		if v := aboutVersion(path, name); v != "" {
			byVersion[v] = append(byVersion[v], name)
		}
	}
	if len(byVersion) < 2 {
		return nil
	}
	versions := make([]string, 0, len(byVersion))
	for v := range byVersion {
		versions = append(versions, v)
	}
	// The version most plugins have first: the others are the odd ones.
	slices.SortFunc(versions, func(a, b string) int {
		if d := len(byVersion[b]) - len(byVersion[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, v := range versions {
		parts = append(parts, fmt.Sprintf("%s at %s", strings.Join(byVersion[v], " "), v))
	}
	return []finding{{
		Problem: fmt.Sprintf("cniforge plugins of %d versions in %s: %s; each runs its own version's code for every pod, DEL and GC included",
			len(versions), binDir, strings.Join(parts, "; ")),
		Fix: fmt.Sprintf("install one release whole: cniforge install --dir %s with cniforge-light and cniforge-dhcp beside cniforge (a plugin left at another version, such as dhcp with no cniforge-dhcp beside the new cniforge, stays as it was)", binDir),
	}}
}

// aboutVersion runs the plugin at path without CNI_COMMAND, as a reader
// would to see what it is, and returns the version its about line gives
// for name ("" when it gives none).
func aboutVersion(path, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = []string{} // no CNI_COMMAND: the about text, not a plugin call
	out, _ := cmd.CombinedOutput()
	// The about line (plugin.Plugin.About): "CNI <name> plugin <version>
	// (cniforge): <summary>".
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(line, "CNI "+name+" plugin ")
		if !ok {
			continue
		}
		if v, _, ok := strings.Cut(rest, " (cniforge): "); ok && v != "" && !strings.Contains(v, " ") {
			return v
		}
	}
	return ""
}

// sysctlFindings: forwarding must be on for a network that routes its
// pods through the host; br_netfilter's iptables hook must be on for a
// bridge network with firewall, whose rules otherwise never see traffic
// between two pods of the bridge.
func sysctlFindings(st *nodeState) []finding {
	var out []finding
	routes, v6, filtered := "", false, ""
	for _, n := range st.Networks {
		if hasPlugin(n.list, "bridge") || hasPlugin(n.list, "ptp") {
			if routes == "" {
				routes = n.Name
			}
			if n.hl != nil {
				for _, set := range n.hl.RangeSets {
					for _, r := range set.Ranges {
						v6 = v6 || r.Subnet.Addr().Is6()
					}
				}
			}
		}
		if hasPlugin(n.list, "bridge") && hasPlugin(n.list, "firewall") && filtered == "" {
			filtered = n.Name
		}
	}
	if routes != "" {
		if readSysctl("net/ipv4/ip_forward") == "0" {
			out = append(out, finding{Network: routes, Problem: "net.ipv4.ip_forward is 0: pods reach nothing beyond the node, and published ports answer only from the node",
				Fix: "sysctl -w net.ipv4.ip_forward=1, and find what turned it off (bridge and ptp turn it on at ADD)"})
		}
		if v6 && readSysctl("net/ipv6/conf/all/forwarding") == "0" {
			out = append(out, finding{Network: routes, Problem: "net.ipv6.conf.all.forwarding is 0 while a network hands out IPv6 addresses",
				Fix: "sysctl -w net.ipv6.conf.all.forwarding=1"})
		}
	}
	if filtered != "" {
		switch v := readSysctl("net/bridge/bridge-nf-call-iptables"); v {
		case "":
			out = append(out, finding{Network: filtered, Problem: "br_netfilter is not loaded: the firewall plugin's rules never see traffic between two pods on the same bridge",
				Fix: "modprobe br_netfilter (and list it in /etc/modules-load.d/), then sysctl -w net.bridge.bridge-nf-call-iptables=1"})
		case "0":
			out = append(out, finding{Network: filtered, Problem: "net.bridge.bridge-nf-call-iptables is 0: the firewall plugin's rules never see traffic between two pods on the same bridge",
				Fix: "sysctl -w net.bridge.bridge-nf-call-iptables=1 (and net.bridge.bridge-nf-call-ip6tables=1)"})
		}
	}
	return out
}

// readSysctl returns the value, "" when the key does not exist.
func readSysctl(key string) string {
	b, err := os.ReadFile(filepath.Join(procSys, key))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// rangeFindings: a host-local network with less than a tenth of its
// addresses free.
func rangeFindings(st *nodeState) []finding {
	var out []finding
	for _, n := range st.Networks {
		if n.hl == nil || n.Free == "" {
			continue
		}
		free, ok := new(big.Int).SetString(n.Free, 10)
		if !ok {
			continue
		}
		total := new(big.Int).Add(free, big.NewInt(int64(n.Used)))
		if new(big.Int).Mul(free, big.NewInt(10)).Cmp(total) >= 0 {
			continue
		}
		orphans := 0
		for _, o := range st.Orphans {
			if o.Network == n.Name {
				orphans++
			}
		}
		problem := fmt.Sprintf("%s of %s addresses free", free, total)
		if free.Sign() == 0 {
			problem = fmt.Sprintf("no address free (%s used): every ADD fails", total)
		}
		fix := "widen the range, or spread pods over more nodes"
		if orphans > 0 || st.leakedIn(n.Name) > 0 {
			fix = fmt.Sprintf("%d reservation(s) no cached attachment owns and %d attachment(s) whose netns is gone: cniforge gc --apply reclaims them; then widen the range if still needed",
				orphans, st.leakedIn(n.Name))
		}
		out = append(out, finding{Network: n.Name, Problem: problem, Fix: fix})
	}
	return out
}

func (st *nodeState) leakedIn(network string) int {
	k := 0
	for _, a := range st.Attachments {
		if a.Network == network && a.NetnsState == nsGone {
			k++
		}
	}
	return k
}

// iptablesFindings: CNI chains (CNI-*, upstream's and ours) in both
// iptables-legacy and iptables-nft. The kernel evaluates both, so a rule
// in one can undo or shadow the other's; it happens when a node's
// iptables alternative was switched with pods running.
func iptablesFindings() []finding {
	var out []finding
	nft := nftCNIChains()
	for _, fam := range []struct{ save, name string }{{"iptables-legacy-save", "IPv4"}, {"ip6tables-legacy-save", "IPv6"}} {
		legacy := legacyCNIChains(fam.save)
		if len(legacy) == 0 || len(nft[fam.name]) == 0 {
			continue
		}
		out = append(out, finding{
			Problem: fmt.Sprintf("%s CNI chains in both iptables-legacy (%s) and iptables-nft (%s): the kernel runs both sets of rules",
				fam.name, strings.Join(firstN(legacy, 3), ", "), strings.Join(firstN(nft[fam.name], 3), ", ")),
			Fix: "keep one backend: drain the node, remove the other's CNI-* chains (iptables-legacy -t nat -F/-X, or iptables-nft), and make update-alternatives --display iptables name the one kept"})
	}
	return out
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("%d more", len(s)-n))
}

// legacyCNIChains lists the CNI-* chains iptables-legacy's tables hold, from
// its save output (legacy tables have no netlink interface). A missing
// binary or no legacy table: none.
func legacyCNIChains(save string) []string {
	path, err := exec.LookPath(save)
	if err != nil {
		return nil
	}
	var buf bytes.Buffer
	cmd := exec.Command(path)
	cmd.Stdout = &buf
	if cmd.Run() != nil {
		return nil
	}
	var out []string
	table := ""
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":CNI-"):
			name, _, _ := strings.Cut(line[1:], " ")
			out = append(out, table+"/"+name)
		}
	}
	return out
}

// nftCNIChains lists, per family, the CNI-* chains in nf_tables' ip and
// ip6 tables (where iptables-nft keeps them), over netlink.
func nftCNIChains() map[string][]string {
	out := map[string][]string{}
	c, err := nftables.New()
	if err != nil {
		return out
	}
	defer c.CloseLasting()
	chains, err := c.ListChains()
	if err != nil {
		return out
	}
	for _, ch := range chains {
		if !strings.HasPrefix(ch.Name, "CNI-") || ch.Table == nil {
			continue
		}
		switch ch.Table.Family {
		case nftables.TableFamilyIPv4:
			out["IPv4"] = append(out["IPv4"], ch.Table.Name+"/"+ch.Name)
		case nftables.TableFamilyIPv6:
			out["IPv6"] = append(out["IPv6"], ch.Table.Name+"/"+ch.Name)
		}
	}
	return out
}
