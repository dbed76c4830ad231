package node

import (
	"errors"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
)

// lockHeld reports whether some command holds host-local's lock on a
// network folder (upstream's and ours: flock on <folder>/lock) right now.
func lockHeld(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // no command ever ran there
	}
	if err != nil {
		return false, err
	}
	defer f.Close() // drops the lock if we got it
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// hostAliases are the aliases of this namespace's links: bridge and ptp
// tag a host veth "cni:<containerID>:<ifname>", and a veth end lives only
// while its peer's namespace does.
func hostAliases() (map[string]bool, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := ip.LinkList(h)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, l := range links {
		if a := l.Attrs().Alias; a != "" {
			out[a] = true
		}
	}
	return out, nil
}

type ownerGroup struct {
	id, ifName string
	res        []reservation
	newest     time.Time
}

func (g ownerGroup) ips() string {
	var s []string
	for _, r := range g.res {
		s = append(s, r.IP)
	}
	return strings.Join(s, ",")
}

// groupByOwner: one DEL per (container ID, ifname), aged by its newest file.
func groupByOwner(res []reservation) []ownerGroup {
	var out []ownerGroup
	idx := map[[2]string]int{}
	for _, r := range res {
		k := [2]string{r.ContainerID, r.IfName}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, ownerGroup{id: r.ContainerID, ifName: r.IfName})
		}
		out[i].res = append(out[i].res, r)
		if r.ModTime.After(out[i].newest) {
			out[i].newest = r.ModTime
		}
	}
	return out
}
