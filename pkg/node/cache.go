package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"
)

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

// errNotRegular is openRegular's answer for a FIFO, device, socket or
// folder.
var errNotRegular = errors.New("not a regular file")

// openRegular opens the regular file at path for reading. A FIFO, device
// or socket is refused (errNotRegular) without blocking: the open does not
// wait (O_NONBLOCK) and fstat checks what was opened, as the name can
// change meanwhile.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w (%s)", path, errNotRegular, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readRegular reads at most max bytes of the regular file at path (see
// openRegular).
func readRegular(path string, max int64) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return b, nil
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
