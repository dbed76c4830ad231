package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"golang.org/x/sys/unix"

	hostlocal "github.com/cniforge/plugins/plugins/ipam/host-local"
)

// The node tool: what libcni's result cache (written by containerd, CRI-O
// and Podman) says is attached, which host-local reservations nobody owns,
// and a GC for runtimes that never send one.

type nodeDirs struct{ cache, conf, bin string }

func nodeFlags(name string, stderr io.Writer) (*flag.FlagSet, *nodeDirs) {
	fl := flag.NewFlagSet("cniforge "+name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	d := &nodeDirs{}
	fl.StringVar(&d.cache, "cache-dir", libcni.CacheDir, "libcni's cache (results/ below it)")
	fl.StringVar(&d.conf, "conf-dir", "/etc/cni/net.d", "network configs")
	fl.StringVar(&d.bin, "bin-dir", "/opt/cni/bin", "plugin binaries")
	return fl, d
}

// Netns states of a cached attachment.
const (
	nsLive    = "live"
	nsGone    = "gone"
	nsUnknown = "unknown" // no path recorded, or it could not be checked
)

type attachment struct {
	Network     string   `json:"network"`
	ContainerID string   `json:"containerID"`
	IfName      string   `json:"ifname"`
	Netns       string   `json:"netns"`
	IPs         []string `json:"ips"`
	NetnsState  string   `json:"netnsState"`

	att *libcni.NetworkAttachment
}

type reservation struct {
	Network     string `json:"network"`
	IP          string `json:"ip"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname,omitempty"`
	File        string `json:"file"`
}

type network struct {
	Name       string `json:"name"`
	File       string `json:"file"`
	CNIVersion string `json:"cniVersion"`
	IPAM       string `json:"ipam,omitempty"`
	Used       int    `json:"used"`
	Free       string `json:"free,omitempty"` // a decimal: IPv6 ranges exceed 64 bits

	list *libcni.NetworkConfigList
	hl   *hostlocal.Config
}

type nodeState struct {
	Attachments []attachment  `json:"attachments"`
	Orphans     []reservation `json:"orphanReservations"`
	Networks    []network     `json:"networks"`
	Warnings    []string      `json:"warnings,omitempty"`
}

func loadNode(d *nodeDirs) (*nodeState, error) {
	st := &nodeState{Attachments: []attachment{}, Orphans: []reservation{}, Networks: []network{}}
	if err := st.loadNetworks(d.conf); err != nil {
		return nil, err
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{d.bin}, d.cache, nil)
	atts, err := cni.GetCachedAttachments("")
	if err != nil {
		return nil, fmt.Errorf("read libcni cache %s: %w", d.cache, err)
	}
	owned := map[[3]string]bool{}
	for _, a := range atts {
		netns := a.NetNS
		if netns == "" {
			netns = cachedSandbox(d.cache, a)
		}
		st.Attachments = append(st.Attachments, attachment{
			Network: a.Network, ContainerID: a.ContainerID, IfName: a.IfName, Netns: netns,
			IPs:        cachedIPs(d.cache, a),
			NetnsState: netnsState(netns),
			att:        a,
		})
		owned[[3]string{a.Network, a.ContainerID, a.IfName}] = true
		owned[[3]string{a.Network, a.ContainerID, ""}] = true // an old, ID-only reservation
	}
	for i := range st.Networks {
		n := &st.Networks[i]
		if n.hl == nil {
			continue
		}
		res, err := reservations(n.hl)
		if err != nil {
			st.Warnings = append(st.Warnings, err.Error())
			continue
		}
		n.Used = len(res)
		n.Free = freeAddresses(n.hl, len(res))
		for _, r := range res {
			if !owned[[3]string{r.Network, r.ContainerID, r.IfName}] {
				st.Orphans = append(st.Orphans, r)
			}
		}
	}
	return st, nil
}

// loadNetworks reads every config in dir as libcni does (.conf, .conflist,
// .json, sorted by file name; the first file of a network name wins).
func (st *nodeState) loadNetworks(dir string) error {
	files, err := libcni.ConfFiles(dir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return fmt.Errorf("read conf dir %s: %w", dir, err)
	}
	sort.Strings(files)
	seen := map[string]bool{}
	for _, f := range files {
		var list *libcni.NetworkConfigList
		if strings.HasSuffix(f, ".conflist") {
			list, err = libcni.ConfListFromFile(f)
		} else {
			var c *libcni.NetworkConfig
			if c, err = libcni.ConfFromFile(f); err == nil {
				list, err = libcni.ConfListFromConf(c)
			}
		}
		if err != nil {
			st.Warnings = append(st.Warnings, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		if seen[list.Name] {
			continue
		}
		seen[list.Name] = true
		n := network{Name: list.Name, File: f, CNIVersion: list.CNIVersion, list: list}
		for _, p := range list.Plugins {
			if p.Network.IPAM.Type == "" {
				continue
			}
			n.IPAM = p.Network.IPAM.Type
			if n.IPAM == "host-local" {
				n.hl, err = hostLocalConfig(list, p)
				if err != nil {
					st.Warnings = append(st.Warnings, fmt.Sprintf("%s: %v", f, err))
				}
			}
			break
		}
		st.Networks = append(st.Networks, n)
	}
	return nil
}

// hostLocalConfig parses a plugin's host-local section the way the plugin
// will see it: with the list's name and cniVersion injected, as libcni does.
func hostLocalConfig(list *libcni.NetworkConfigList, p *libcni.PluginConfig) (*hostlocal.Config, error) {
	conf, err := libcni.InjectConf(p, map[string]interface{}{"name": list.Name, "cniVersion": list.CNIVersion})
	if err != nil {
		return nil, err
	}
	return hostlocal.ParseConfig(conf.Bytes)
}

// reservations lists host-local's reservation files of a network: a file
// named by the address, holding "<containerID>\r\n<ifname>" (or, from
// older upstream releases, the container ID alone).
func reservations(c *hostlocal.Config) ([]reservation, error) {
	dir := filepath.Join(c.DataDir, c.Name)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []reservation
	for _, e := range entries {
		a, err := netip.ParseAddr(e.Name())
		if err != nil || !e.Type().IsRegular() {
			continue // last_reserved_ip.N, lock, our index
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // released meanwhile
		}
		s := strings.TrimSpace(string(b))
		id, ifName, _ := strings.Cut(s, "\r\n")
		out = append(out, reservation{Network: c.Name, IP: a.String(), ContainerID: id, IfName: ifName,
			File: filepath.Join(dir, e.Name())})
	}
	return out, nil
}

// freeAddresses is what the ranges hold minus what is reserved: each
// range from its start to its end, without its gateway.
func freeAddresses(c *hostlocal.Config, used int) string {
	total := new(big.Int)
	for _, set := range c.RangeSets {
		for _, r := range set.Ranges {
			n := new(big.Int).Sub(new(big.Int).SetBytes(r.End.AsSlice()), new(big.Int).SetBytes(r.Start.AsSlice()))
			n.Add(n, big.NewInt(1))
			if r.Gateway.IsValid() && r.Start.Compare(r.Gateway) <= 0 && r.Gateway.Compare(r.End) <= 0 {
				n.Sub(n, big.NewInt(1))
			}
			total.Add(total, n)
		}
	}
	return total.Sub(total, big.NewInt(int64(used))).String()
}

// cachedSandbox is the netns path that the result libcni cached for a
// gives a's interface: libcni before 1.2 (containerd 1.6 and 1.7 among its
// users) records no netns of its own in the cache entry, but the result's
// interface carries it as "sandbox". "" if there is none.
func cachedSandbox(cacheDir string, a *libcni.NetworkAttachment) string {
	b, err := os.ReadFile(cacheFile(cacheDir, a))
	if err != nil {
		return ""
	}
	var c struct {
		Result struct {
			Interfaces []struct {
				Name    string `json:"name"`
				Sandbox string `json:"sandbox"`
			} `json:"interfaces"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	for _, i := range c.Result.Interfaces {
		if i.Name == a.IfName && i.Sandbox != "" {
			return i.Sandbox
		}
	}
	return ""
}

func cacheFile(cacheDir string, a *libcni.NetworkAttachment) string {
	return filepath.Join(cacheDir, "results", a.Network+"-"+a.ContainerID+"-"+a.IfName)
}

// cachedIPs reads the addresses of the result libcni cached for a.
func cachedIPs(cacheDir string, a *libcni.NetworkAttachment) []string {
	b, err := os.ReadFile(cacheFile(cacheDir, a))
	if err != nil {
		return []string{}
	}
	var c struct {
		Result struct {
			IPs []struct {
				Address string `json:"address"`
			} `json:"ips"`
			IP4 *struct {
				IP string `json:"ip"`
			} `json:"ip4"`
			IP6 *struct {
				IP string `json:"ip"`
			} `json:"ip6"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &c) != nil {
		return []string{}
	}
	ips := []string{}
	for _, ip := range c.Result.IPs {
		ips = append(ips, ip.Address)
	}
	for _, old := range []*struct {
		IP string `json:"ip"`
	}{c.Result.IP4, c.Result.IP6} {
		if old != nil {
			ips = append(ips, old.IP)
		}
	}
	return ips
}

// netnsState says whether the netns at path still exists. Only a path
// that is gone (or holds no namespace) is "gone"; anything in doubt is
// "unknown", which gc treats as alive.
func netnsState(path string) string {
	if path == "" {
		return nsUnknown
	}
	var fsst unix.Statfs_t
	err := unix.Statfs(path, &fsst)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nsGone
	case err != nil:
		return nsUnknown
	case fsst.Type == unix.NSFS_MAGIC:
		return nsLive
	case fsst.Type == unix.PROC_SUPER_MAGIC:
		// A /proc/<pid>/ns/net of a live process (statfs sees procfs).
		return nsLive
	}
	// A file left where a namespace was bind-mounted: the mount is gone.
	return nsGone
}

func ls(args []string, stdout, stderr io.Writer) int {
	fl, d := nodeFlags("ls", stderr)
	asJSON := fl.Bool("json", false, "print JSON")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	st, err := loadNode(d)
	if err != nil {
		fmt.Fprintf(stderr, "cniforge ls: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return 1
		}
		return 0
	}
	printNode(st, d, stdout)
	return 0
}

func printNode(st *nodeState, d *nodeDirs, out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "attachments (libcni cache %s):\n", filepath.Join(d.cache, "results"))
	fmt.Fprintln(tw, "NETWORK\tCONTAINER\tIFNAME\tNETNS\tIPS\tNETNS STATE")
	for _, a := range st.Attachments {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Network, a.ContainerID, a.IfName, dash(a.Netns),
			dash(strings.Join(a.IPs, ",")), a.NetnsState)
	}
	fmt.Fprintln(tw, "\nhost-local reservations no cached attachment owns:")
	fmt.Fprintln(tw, "NETWORK\tIP\tCONTAINER\tIFNAME\tFILE")
	for _, r := range st.Orphans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Network, r.IP, r.ContainerID, dash(r.IfName), r.File)
	}
	fmt.Fprintf(tw, "\nnetworks (%s):\n", d.conf)
	fmt.Fprintln(tw, "NETWORK\tCNIVERSION\tIPAM\tUSED\tFREE\tFILE")
	for _, n := range st.Networks {
		used := "-"
		if n.hl != nil {
			used = fmt.Sprint(n.Used)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.CNIVersion, dash(n.IPAM), used, dash(n.Free), n.File)
	}
	tw.Flush()
	for _, w := range st.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// gc DELs, through libcni, every cached attachment whose netns is gone,
// then GCs each network (cniVersion 1.1.0 and later) with every attachment
// still cached as valid. Without --apply it only says what it would do.
func gc(args []string, stdout, stderr io.Writer) int {
	fl, d := nodeFlags("gc", stderr)
	apply := fl.Bool("apply", false, "do it (default: a dry run)")
	only := fl.String("network", "", "only this network")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	st, err := loadNode(d)
	if err != nil {
		fmt.Fprintf(stderr, "cniforge gc: %v\n", err)
		return 1
	}
	if *only != "" && !st.hasNetwork(*only) {
		fmt.Fprintf(stderr, "cniforge gc: no network %q in %s\n", *only, d.conf)
		return 1
	}
	would := "would "
	if *apply {
		would = ""
	}
	ctx := context.Background()
	cni := libcni.NewCNIConfigWithCacheDir([]string{d.bin}, d.cache, nil)
	var errs []error
	for _, n := range st.Networks {
		if *only != "" && n.Name != *only {
			continue
		}
		for _, a := range st.Attachments {
			if a.Network != n.Name || a.NetnsState != nsGone {
				continue
			}
			fmt.Fprintf(stdout, "%s: %sDEL %s %s (netns %s is gone)\n", n.Name, would, a.ContainerID, a.IfName, a.Netns)
			if !*apply {
				continue
			}
			rt := &libcni.RuntimeConf{ContainerID: a.ContainerID, NetNS: a.Netns, IfName: a.IfName,
				Args: a.att.CniArgs, CapabilityArgs: a.att.CapabilityArgs}
			if err := cni.DelNetworkList(ctx, n.list, rt); err != nil {
				errs = append(errs, fmt.Errorf("%s: DEL %s %s: %w", n.Name, a.ContainerID, a.IfName, err))
				fmt.Fprintf(stdout, "%s: DEL %s %s failed: %v\n", n.Name, a.ContainerID, a.IfName, err)
			}
		}
		if ok, _ := version.GreaterThanOrEqualTo(n.CNIVersion, "1.1.0"); !ok {
			fmt.Fprintf(stdout, "%s: no GC (cniVersion %s; GC needs 1.1.0)\n", n.Name, n.CNIVersion)
			continue
		}
		if n.list.DisableGC {
			fmt.Fprintf(stdout, "%s: no GC (disableGC)\n", n.Name)
			continue
		}
		var orphans []string
		for _, r := range st.Orphans {
			if r.Network == n.Name {
				orphans = append(orphans, r.IP)
			}
		}
		// The valid list is read again now: what the DELs above removed is
		// gone from the cache, and one that failed stays valid.
		var valid []types.GCAttachment
		if *apply {
			valid, err = validAttachments(cni, n.Name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
		} else {
			for _, a := range st.Attachments { // what the DELs would leave
				if a.Network == n.Name && a.NetnsState != nsGone {
					valid = append(valid, types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName})
				}
			}
		}
		msg := fmt.Sprintf("%s: %sGC keeping %d cached attachment(s)", n.Name, would, len(valid))
		if len(orphans) > 0 {
			msg += fmt.Sprintf("; releases unowned reservation(s) %s", strings.Join(orphans, ", "))
		}
		fmt.Fprintln(stdout, msg)
		if !*apply {
			continue
		}
		if err := cni.GCNetworkList(ctx, n.list, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
			errs = append(errs, fmt.Errorf("%s: GC: %w", n.Name, err))
			fmt.Fprintf(stdout, "%s: GC failed: %v\n", n.Name, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "cniforge gc: %v\n", err)
		return 1
	}
	return 0
}

func validAttachments(cni *libcni.CNIConfig, network string) ([]types.GCAttachment, error) {
	atts, err := cni.GetCachedAttachments("")
	if err != nil {
		return nil, err
	}
	valid := []types.GCAttachment{}
	for _, a := range atts {
		if a.Network == network {
			valid = append(valid, types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName})
		}
	}
	return valid, nil
}

func (st *nodeState) hasNetwork(name string) bool {
	for _, n := range st.Networks {
		if n.Name == name {
			return true
		}
	}
	return false
}
