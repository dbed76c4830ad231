package node

import (
	"encoding/json"
	"errors"
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
	"time"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"

	hostlocal "github.com/cniforge/plugins/plugins/ipam/host-local"
)

// Dirs are the node's folders every verb but install reads.
type Dirs struct {
	Cache  string // libcni's cache (results/ below it); libcni.CacheDir on a node
	Conf   string // network configs; /etc/cni/net.d on a node
	Bin    string // plugin binaries; /opt/cni/bin on a node
	Multus string // Multus's cache, its cniDir (DefaultMultusDir), read when there
}

// Netns states of a cached attachment.
const (
	nsLive    = "live"
	nsGone    = "gone"
	nsUnknown = "unknown" // undecidable: kept, with the reason in NetnsWhy
)

type attachment struct {
	Network     string   `json:"network"`
	ContainerID string   `json:"containerID"`
	IfName      string   `json:"ifname"`
	Netns       string   `json:"netns"`
	IPs         []string `json:"ips"`
	NetnsState  string   `json:"netnsState"`
	NetnsWhy    string   `json:"netnsWhy,omitempty"`
	// Cache is "multus" for a delegate attachment Multus cached: reported,
	// owning its reservations, never DELed here (Multus DELs it when the
	// runtime DELs the pod's Multus attachment).
	Cache string `json:"cache,omitempty"`

	entry cacheEntry
}

type reservation struct {
	Network     string    `json:"network"`
	IP          string    `json:"ip"`
	ContainerID string    `json:"containerID"`
	IfName      string    `json:"ifname,omitempty"`
	File        string    `json:"file"`
	ModTime     time.Time `json:"modTime"`
}

type network struct {
	Name       string   `json:"name"`
	File       string   `json:"file"`
	CNIVersion string   `json:"cniVersion"`
	IPAM       string   `json:"ipam,omitempty"`
	DisableGC  bool     `json:"disableGC,omitempty"`
	Used       int      `json:"used"`
	Free       string   `json:"free,omitempty"`       // attachments that still fit (a decimal: IPv6 ranges exceed 64 bits)
	FreePerSet []string `json:"freePerSet,omitempty"` // each range set's free addresses, when several

	list *libcni.NetworkConfigList
	hl   *hostlocal.Config
	res  []reservation // every reservation, owned or not
}

type nodeState struct {
	Attachments []attachment  `json:"attachments"`
	Orphans     []reservation `json:"orphanReservations"`
	Networks    []network     `json:"networks"`
	Warnings    []string      `json:"warnings,omitempty"`

	MultusPods []string `json:"multusPods,omitempty"` // container IDs Multus keeps delegates for

	noResults  bool     // the cache dir has no results/ folder
	view       hostView // whether a missing netns file proves anything here
	unreadable []string // cache files that could not be read: their owners are unknown
}

// The largest file the node tool reads: a libcni cache entry holds a
// conflist and a result; a reservation file a container ID and a name.
const maxCacheFile = 16 << 20

func loadNode(d *Dirs) (*nodeState, error) {
	st := &nodeState{Attachments: []attachment{}, Orphans: []reservation{}, Networks: []network{}}
	if err := st.loadNetworks(d.Conf); err != nil {
		return nil, err
	}
	entries, noResults, err := st.readCache(d.Cache)
	if err != nil {
		return nil, err
	}
	st.noResults = noResults
	multusEntries, multusPods, err := st.readMultus(d.Multus)
	if err != nil {
		return nil, err
	}
	view := probeHostView()
	st.view = view
	owned := map[[3]string]bool{}
	for i, e := range append(entries, multusEntries...) {
		netns := e.NetNS
		if netns == "" {
			netns = cachedSandbox(e.Result, e.IfName)
		}
		state, why := netnsState(netns, view)
		a := attachment{
			Network: e.NetworkName, ContainerID: e.ContainerID, IfName: e.IfName, Netns: netns,
			IPs: cachedIPs(e.Result), NetnsState: state, NetnsWhy: why, entry: e,
		}
		if i >= len(entries) {
			a.Cache = "multus"
		}
		st.Attachments = append(st.Attachments, a)
		owned[[3]string{e.NetworkName, e.ContainerID, e.IfName}] = true
		owned[[3]string{e.NetworkName, e.ContainerID, ""}] = true // an old, ID-only reservation
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
		n.res = res
		n.Used = len(res)
		n.Free, n.FreePerSet = freeAddresses(n.hl, res)
		for _, r := range res {
			if !owned[[3]string{r.Network, r.ContainerID, r.IfName}] && !multusPods[r.ContainerID] {
				st.Orphans = append(st.Orphans, r)
			}
		}
	}
	if st.noResults {
		st.Warnings = append(st.Warnings, fmt.Sprintf("%s has no results/ folder: is --cache-dir right? Every reservation looks unowned", d.Cache))
	} else if len(entries) == 0 && len(st.Orphans) > 0 {
		st.Warnings = append(st.Warnings, fmt.Sprintf("libcni cache %s is empty while reservations exist: is --cache-dir right?", d.Cache))
	}
	for _, f := range st.unreadable {
		st.Warnings = append(st.Warnings, "unreadable cache entry "+f+": its attachment's reservations cannot be told from leaked ones")
	}
	return st, nil
}

// cacheEntry is one file of libcni's result cache,
// <cache>/results/<network>-<containerID>-<ifname>, as libcni writes it:
// what the runtime passed to ADD (config, netns, args) and the result.
type cacheEntry struct {
	Kind           string                 `json:"kind"`
	ContainerID    string                 `json:"containerId"`
	Config         []byte                 `json:"config"`
	IfName         string                 `json:"ifName"`
	NetworkName    string                 `json:"networkName"`
	NetNS          string                 `json:"netns,omitempty"`
	CniArgs        [][2]string            `json:"cniArgs,omitempty"`
	CapabilityArgs map[string]interface{} `json:"capabilityArgs,omitempty"`
	Result         json.RawMessage        `json:"result,omitempty"`
}

// readCache reads <dir>/results. libcni's own reader skips what it cannot
// parse; here such a file is recorded, because the attachment it stands
// for may hold reservations that would otherwise look leaked.
func (st *nodeState) readCache(dir string) (out []cacheEntry, noResults bool, err error) {
	results := filepath.Join(dir, "results")
	ents, err := os.ReadDir(results)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read libcni cache %s: %w", results, err)
	}
	for _, de := range ents {
		p := filepath.Join(results, de.Name())
		b, err := readRegular(p, maxCacheFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue // DELeted meanwhile
		}
		var e cacheEntry
		if err == nil {
			err = json.Unmarshal(b, &e)
		}
		if err == nil && (e.Kind != libcni.CNICacheV1 || e.ContainerID == "" || e.IfName == "" || e.NetworkName == "") {
			err = fmt.Errorf("not a %s entry", libcni.CNICacheV1)
		}
		if err != nil {
			st.unreadable = append(st.unreadable, fmt.Sprintf("%s (%v)", p, err))
			continue
		}
		out = append(out, e)
	}
	return out, false, nil
}

// DefaultMultusDir is Multus's cniDir default, on the host for the thin
// plugin and the thick one's daemon alike.
const DefaultMultusDir = "/var/lib/cni/multus"

// readMultus reads Multus's cache, laid out as Multus (thin, and the thick
// daemon) writes it in its cniDir:
//
//	<dir>/results/<network>-<containerID>-<ifname>   libcni's cache of each delegate
//	                                                (Multus runs libcni with cniDir as cache dir)
//	<dir>/<containerID>                             the pod's delegates (a JSON array of their
//	                                                configs), kept for Multus's own DEL
//
// Every reservation of a container listed either way is Multus's. A
// missing dir is a node without Multus.
func (st *nodeState) readMultus(dir string) (entries []cacheEntry, pods map[string]bool, err error) {
	pods = map[string]bool{}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, pods, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read Multus cache %s: %w", dir, err)
	}
	entries, _, err = st.readCache(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		pods[e.ContainerID] = true
	}
	for _, de := range ents {
		if de.IsDir() {
			continue // results/, and whatever else Multus keeps there
		}
		p := filepath.Join(dir, de.Name())
		b, err := readRegular(p, maxCacheFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue // DELeted meanwhile
		}
		var delegates []map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(b, &delegates)
		}
		if err != nil {
			st.unreadable = append(st.unreadable, fmt.Sprintf("%s (%v)", p, err))
			continue
		}
		pods[de.Name()] = true
	}
	for id := range pods {
		st.MultusPods = append(st.MultusPods, id)
	}
	sort.Strings(st.MultusPods)
	return entries, pods, nil
}

// readRegular reads at most max bytes of the regular file at path. A FIFO,
// device or socket is refused without blocking: the open does not wait
// (O_NONBLOCK) and fstat checks what was opened.
func readRegular(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return b, nil
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
		b, err := readRegular(f, maxCacheFile)
		if err == nil {
			list, err = parseList(b)
		}
		if err != nil {
			st.Warnings = append(st.Warnings, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		if seen[list.Name] {
			continue
		}
		seen[list.Name] = true
		n := network{Name: list.Name, File: f, CNIVersion: list.CNIVersion, DisableGC: list.DisableGC, list: list}
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

// parseList reads a conflist, or a single plugin's config as a list of
// one: the files of a conf dir, and the config libcni caches with an
// attachment (a list's bytes for AddNetworkList, a plugin's for AddNetwork).
func parseList(b []byte) (*libcni.NetworkConfigList, error) {
	var probe struct {
		Plugins json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, err
	}
	if probe.Plugins != nil {
		list, err := libcni.ConfListFromBytes(b)
		if err == nil && len(list.Plugins) == 0 {
			err = errors.New("no plugins")
		}
		return list, err
	}
	c, err := libcni.ConfFromBytes(b)
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromConf(c)
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
		p := filepath.Join(dir, e.Name())
		fi, err := e.Info()
		if err != nil {
			continue // released meanwhile
		}
		b, err := readRegular(p, 4096)
		if err != nil {
			continue // released meanwhile
		}
		s := strings.TrimSpace(string(b))
		id, ifName, _ := strings.Cut(s, "\r\n")
		out = append(out, reservation{Network: c.Name, IP: a.String(), ContainerID: id, IfName: ifName,
			File: p, ModTime: fi.ModTime()})
	}
	return out, nil
}

// freeAddresses says how many more attachments a network's ranges can
// take. An ADD needs an address from every range set, so that is the
// least, over the sets, of what the set's ranges hold (each from its start
// to its end, without its gateway) minus the reservations inside them;
// perSet is each set's figure in config order, when there are several.
// Decimals: IPv6 ranges exceed 64 bits.
func freeAddresses(c *hostlocal.Config, res []reservation) (free string, perSet []string) {
	var least *big.Int
	for _, set := range c.RangeSets {
		n := new(big.Int)
		for _, r := range set.Ranges {
			size := new(big.Int).Sub(new(big.Int).SetBytes(r.End.AsSlice()), new(big.Int).SetBytes(r.Start.AsSlice()))
			size.Add(size, big.NewInt(1))
			if inRange(r, r.Gateway) {
				size.Sub(size, big.NewInt(1))
			}
			n.Add(n, size)
		}
		for _, rv := range res {
			a, err := netip.ParseAddr(rv.IP)
			if err != nil {
				continue
			}
			for _, r := range set.Ranges {
				if inRange(r, a) && a != r.Gateway {
					n.Sub(n, big.NewInt(1))
					break
				}
			}
		}
		if n.Sign() < 0 {
			n.SetInt64(0)
		}
		perSet = append(perSet, n.String())
		if least == nil || n.Cmp(least) < 0 {
			least = n
		}
	}
	if least == nil {
		return "", nil
	}
	if len(perSet) < 2 {
		perSet = nil
	}
	return least.String(), perSet
}

// cachedSandbox is the netns path a cached result gives interface
// ifName: libcni before 1.2 (containerd 1.6 and 1.7 among its users)
// records no netns of its own in the cache entry, but the result's
// interface carries it as "sandbox". "" if there is none.
func cachedSandbox(raw json.RawMessage, ifName string) string {
	var r struct {
		Interfaces []struct {
			Name    string `json:"name"`
			Sandbox string `json:"sandbox"`
		} `json:"interfaces"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil {
		return ""
	}
	for _, i := range r.Interfaces {
		if i.Name == ifName && i.Sandbox != "" {
			return i.Sandbox
		}
	}
	return ""
}

func inRange(r hostlocal.Range, a netip.Addr) bool {
	return a.IsValid() && a.BitLen() == r.Start.BitLen() && r.Start.Compare(a) <= 0 && a.Compare(r.End) <= 0
}

// cachedIPs reads the addresses of a cached result.
func cachedIPs(raw json.RawMessage) []string {
	var r struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
		IP4 *struct {
			IP string `json:"ip"`
		} `json:"ip4"`
		IP6 *struct {
			IP string `json:"ip"`
		} `json:"ip6"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil {
		return []string{}
	}
	ips := []string{}
	for _, ip := range r.IPs {
		ips = append(ips, ip.Address)
	}
	for _, old := range []*struct {
		IP string `json:"ip"`
	}{r.IP4, r.IP6} {
		if old != nil {
			ips = append(ips, old.IP)
		}
	}
	return ips
}

// hostView says whether a missing file can prove anything: only in the
// mount namespace the runtime made its netns files in, the host's. The
// tool must show it looks there (probeHostView); when it cannot, every
// missing netns file is kept and reported.
type hostView struct {
	ok  bool
	why string // when not ok
}

// The namespace links probeHostView reads.
const selfMntNS, selfPidNS, initMntNS = "/proc/self/ns/mnt", "/proc/self/ns/pid", "/proc/1/ns/mnt"

// Inodes the kernel gives its initial namespaces: the pid namespace's
// (PROC_PID_INIT_INO) since namespaces had inodes, the mount namespace's
// (MNT_NS_INIT_INO) since Linux 6.18; on older kernels no mount namespace
// has that inode.
const (
	initialPidNSIno = 0xEFFFFFFC
	initialMntNSIno = 0xEFFFFFF8
)

// nsLink is what stat and statfs say of a /proc/<pid>/ns/<type> link.
type nsLink struct {
	dev, ino uint64
	nsfs     bool // the link leads to a namespace (nsfs), not a stand-in file
	err      error
}

func statNS(path string) nsLink {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsLink{err: err}
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return nsLink{err: err}
	}
	return nsLink{dev: st.Dev, ino: st.Ino, nsfs: fs.Type == unix.NSFS_MAGIC}
}

func probeHostView() hostView {
	return decideHostView(statNS(selfMntNS), statNS(selfPidNS), func() nsLink { return statNS(initMntNS) })
}

// decideHostView: this is the host's mount namespace when it is the
// kernel's initial one (told by its inode, Linux 6.18+), or when this
// process is in the initial pid namespace and shares pid 1's mount
// namespace: there pid 1 is the host's init. In a container with its own
// pid namespace (a DaemonSet's, `unshare -p`), pid 1 is that container's
// init, and sharing its mount namespace proves nothing about the host's.
func decideHostView(selfMnt, selfPid nsLink, initMnt func() nsLink) hostView {
	const cannot = "cannot tell this mount namespace from the host's"
	if selfMnt.err != nil {
		return hostView{why: fmt.Sprintf("%s: %v", cannot, selfMnt.err)}
	}
	if selfMnt.nsfs && selfMnt.ino == initialMntNSIno {
		return hostView{ok: true}
	}
	switch {
	case selfPid.err != nil:
		return hostView{why: fmt.Sprintf("%s: %v", cannot, selfPid.err)}
	case !selfPid.nsfs || selfPid.ino != initialPidNSIno:
		return hostView{why: "run in a pid namespace of its own (a container's?), whose pid 1 is not the host's init: " +
			"it cannot show it sees the host's mount namespace, so a missing netns file proves nothing here"}
	}
	// Reading pid 1's namespace links takes ptrace rights over it: root
	// without some of pid 1's capabilities is refused (EACCES).
	init := initMnt()
	if init.err != nil {
		return hostView{why: fmt.Sprintf("%s: %v", cannot, init.err)}
	}
	if !selfMnt.nsfs || !init.nsfs || selfMnt.dev != init.dev || selfMnt.ino != init.ino {
		return hostView{why: "not run in the host's mount namespace (pid 1's): a missing netns file proves nothing here"}
	}
	return hostView{ok: true}
}

// netnsState says whether the netns at path still exists, and when that
// cannot be decided, why. Only "gone" lets gc DEL the attachment, and it
// takes proof:
//   - a path that names a namespace (nsfs) is live;
//   - a path that exists but is no nsfs mount is undecidable: a netns file
//     whose bind mount this mount namespace does not see (a container
//     without mount propagation, a rootless Podman netns seen from the
//     host) is a plain empty file;
//   - a stat error other than ENOENT is undecidable;
//   - ENOENT is proof only in the host's mount namespace (hostView), with
//     the folder that held the file present and readable: in a mount
//     namespace with a tmpfs over /run/netns, or without the host's
//     /run/netns mounted at all, every path is missing;
//   - a /proc/<pid>/ns/net path is never proof of absence: a gone process
//     says nothing of the namespace, which the pod's other processes may
//     hold, and in another pid namespace the number names someone else.
func netnsState(path string, view hostView) (state, why string) {
	if path == "" {
		return nsUnknown, "no netns recorded"
	}
	var fsst unix.Statfs_t
	err := unix.Statfs(path, &fsst)
	isProc := strings.HasPrefix(filepath.Clean(path), "/proc/")
	switch {
	case err == nil && fsst.Type == unix.NSFS_MAGIC:
		return nsLive, ""
	case err == nil:
		return nsUnknown, "a file that is not a namespace mount (a mount this namespace does not see?)"
	case isProc:
		return nsUnknown, fmt.Sprintf("%v: a process gone says nothing of its namespace", err)
	case !errors.Is(err, unix.ENOENT):
		return nsUnknown, err.Error()
	case !view.ok:
		return nsUnknown, view.why
	}
	dir := filepath.Dir(path)
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		_, err = f.Readdirnames(1)
		f.Close()
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		return nsUnknown, fmt.Sprintf("folder %s: %v", dir, err)
	}
	return nsGone, ""
}

// Ls prints what the node holds: libcni's cached attachments (is their
// netns alive?), Multus's delegates, the host-local reservations no cached
// attachment owns, and per network the addresses used and free; as tables,
// or as JSON. It returns the exit status.
func Ls(d *Dirs, asJSON bool, stdout, stderr io.Writer) int {
	st, err := loadNode(d)
	if err != nil {
		fmt.Fprintf(stderr, "cniforge ls: %v\n", err)
		return 1
	}
	if asJSON {
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

// printNode prints st as tables. Every field read from the cache, a
// reservation file or a config goes through q: a container ID holding a
// newline or an escape sequence must not fake rows on the terminal.
func printNode(st *nodeState, d *Dirs, out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	printAttachments := func(cache string) {
		fmt.Fprintln(tw, "NETWORK\tCONTAINER\tIFNAME\tNETNS\tIPS\tNETNS STATE")
		for _, a := range st.Attachments {
			if a.Cache != cache {
				continue
			}
			state := a.NetnsState
			if a.NetnsWhy != "" {
				state += " (" + q(a.NetnsWhy) + ")"
			}
			ips := make([]string, len(a.IPs))
			for i, ip := range a.IPs {
				ips[i] = q(ip)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", q(a.Network), q(a.ContainerID), q(a.IfName), q(dash(a.Netns)),
				dash(strings.Join(ips, ",")), state)
		}
	}
	fmt.Fprintf(tw, "attachments (libcni cache %s):\n", q(filepath.Join(d.Cache, "results")))
	printAttachments("")
	if len(st.MultusPods) > 0 {
		fmt.Fprintf(tw, "\nattachments Multus delegated (its cache %s; pods: %d):\n", q(d.Multus), len(st.MultusPods))
		printAttachments("multus")
	}
	fmt.Fprintln(tw, "\nhost-local reservations no cached attachment owns:")
	fmt.Fprintln(tw, "NETWORK\tIP\tCONTAINER\tIFNAME\tFILE")
	for _, r := range st.Orphans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", q(r.Network), r.IP, q(r.ContainerID), q(dash(r.IfName)), q(r.File))
	}
	fmt.Fprintf(tw, "\nnetworks (%s):\n", q(d.Conf))
	fmt.Fprintln(tw, "NETWORK\tCNIVERSION\tIPAM\tUSED\tFREE\tFILE")
	for _, n := range st.Networks {
		used := "-"
		if n.hl != nil {
			used = fmt.Sprint(n.Used)
		}
		free := dash(n.Free)
		if len(n.FreePerSet) > 1 {
			free += " (by range set: " + strings.Join(n.FreePerSet, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", q(n.Name), q(n.CNIVersion), q(dash(n.IPAM)), used, free, q(n.File))
	}
	tw.Flush()
	for _, w := range st.Warnings {
		fmt.Fprintf(out, "warning: %s\n", q(w))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
