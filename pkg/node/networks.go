package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containernetworking/cni/libcni"

	hostlocal "github.com/cniforge/plugins/plugins/ipam/host-local"
)

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

func inRange(r hostlocal.Range, a netip.Addr) bool {
	return a.IsValid() && a.BitLen() == r.Start.BitLen() && r.Start.Compare(a) <= 0 && a.Compare(r.End) <= 0
}
