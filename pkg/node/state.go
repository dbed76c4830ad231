package node

import (
	"fmt"
	"time"

	"github.com/containernetworking/cni/libcni"

	hostlocal "github.com/cniforge/plugins/plugins/ipam/host-local"
)

// Dirs are the node's folders every verb but install reads.
type Dirs struct {
	Cache  string // libcni's cache (results/ below it); libcni.CacheDir on a node
	Conf   string // network configs; /etc/cni/net.d on a node
	Bin    string // plugin binaries; /opt/cni/bin on a node
	Multus string // Multus's cache, its cniDir (DefaultMultusDir), read when there
	// RuntimeHere says the runtime makes its netns files in this mount
	// namespace (a test node in namespaces of its own, a runtime in this
	// same container): a netns file missing here is gone, even where the
	// tool cannot show that this is the host's mount namespace. The
	// operator's word, for what probeHostView cannot tell.
	RuntimeHere bool
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
	// owning its reservations, DELed here only when the pod's DEL through
	// Multus failed with its netns gone (Multus removed: gcDelegates);
	// otherwise Multus DELs it when the runtime DELs the pod's Multus
	// attachment.
	Cache string `json:"cache,omitempty"`

	entry cacheEntry
}

// runtimeConf is what a's ADD was given, for its CHECK or DEL: its
// netns, and the CNI_ARGS and capabilities libcni cached.
func (a attachment) runtimeConf() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: a.ContainerID, NetNS: a.Netns, IfName: a.IfName,
		Args: a.entry.CniArgs, CapabilityArgs: a.entry.CapabilityArgs}
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
	if d.RuntimeHere && !view.ok {
		view = hostView{ok: true}
	}
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

func (st *nodeState) network(name string) *network {
	for i := range st.Networks {
		if st.Networks[i].Name == name {
			return &st.Networks[i]
		}
	}
	return nil
}

func (st *nodeState) hasNetwork(name string) bool {
	return st.network(name) != nil || st.hasAttachmentOn(name)
}

func (st *nodeState) hasAttachmentOn(network string) bool {
	for _, a := range st.Attachments {
		if a.Network == network {
			return true
		}
	}
	return false
}

func (st *nodeState) hasAttachmentID(network, id string) bool {
	for _, a := range st.Attachments {
		if a.Network == network && a.ContainerID == id {
			return true
		}
	}
	return false
}

func (st *nodeState) orphansOf(network string) []reservation {
	var out []reservation
	for _, r := range st.Orphans {
		if r.Network == network {
			out = append(out, r)
		}
	}
	return out
}

func (st *nodeState) runtimeAttachments() int {
	n := 0
	for _, a := range st.Attachments {
		if a.Cache == "" {
			n++
		}
	}
	return n
}

func (st *nodeState) reservationCount() int {
	n := 0
	for _, nw := range st.Networks {
		n += len(nw.res)
	}
	return n
}
