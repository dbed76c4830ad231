package ip

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// VethOptions describes a veth pair to create.
type VethOptions struct {
	ContIfName string           // name of the end in the container namespace
	HostIfName string           // name of the host end; "" picks a free vethXXXXXXXX
	MTU        int              // 0 keeps the kernel default
	ContMAC    net.HardwareAddr // nil lets the kernel pick
	// ContNS is the container namespace's file descriptor.
	ContNS int

	// lookup finds the new host end; nil is LinkByName. Tests make it fail.
	lookup func(*netlink.Handle, string) (netlink.Link, error)
}

// vethTxQueues is the number of transmit queues SetupVeth gives each end.
// Unasked, the kernel gives a veth one per possible CPU and then cuts the
// active ones down to one (veth_init_queues). Cutting them down waits out
// an RCU grace period (netif_set_real_num_tx_queues: synchronize_net),
// once per end, while the rtnl lock is held, so with pods added at once
// every other link change on the node queued behind those waits. Asking
// for one queue gives the same single active queue, with no wait. What
// differs is only the most a user could later turn on with ethtool -L.
const vethTxQueues = 1

// SetupVeth creates a veth pair from the namespace hostH is bound to: the
// host end stays there, the other end is created directly inside the
// container namespace (so it never appears, even briefly, under a name that
// could clash in the host). It fails if the container already has an
// interface named opts.ContIfName. Both ends are left down.
func SetupVeth(hostH *netlink.Handle, opts VethOptions) (netlink.Link, error) {
	if opts.ContIfName == "" {
		return nil, errors.New("veth: container interface name is empty")
	}
	random := opts.HostIfName == ""
	for attempt := 0; ; attempt++ {
		name := opts.HostIfName
		if random {
			name = randomVethName()
		}
		la := netlink.NewLinkAttrs()
		la.Name = name
		la.MTU = opts.MTU
		la.NumTxQueues = vethTxQueues // the peer gets the same
		veth := &netlink.Veth{
			LinkAttrs:        la,
			PeerName:         opts.ContIfName,
			PeerNamespace:    netlink.NsFd(opts.ContNS),
			PeerMTU:          uint32(opts.MTU),
			PeerHardwareAddr: opts.ContMAC,
		}
		err := hostH.LinkAdd(veth)
		if err == nil {
			lookup := opts.lookup
			if lookup == nil {
				lookup = LinkByName
			}
			l, err := lookup(hostH, name)
			if err != nil {
				// The caller gets no link, so it can push no undo: the
				// pair would leak. Delete it here (its peer goes with it).
				if derr := DelLinkByName(hostH, name); derr != nil {
					err = errors.Join(err, fmt.Errorf("delete it again: %w", derr))
				}
				return nil, fmt.Errorf("look up new veth %q: %w", name, err)
			}
			return l, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("create veth %q <-> %q: %w", name, opts.ContIfName, err)
		}
		// EEXIST: either our random host name was taken (try another) or the
		// container already has ContIfName, which no retry fixes.
		if _, lerr := hostH.LinkByName(name); lerr != nil || !random || attempt >= 8 {
			return nil, fmt.Errorf("create veth %q <-> %q: container or host already has an interface of that name: %w",
				name, opts.ContIfName, err)
		}
	}
}

// randomVethName draws 32 random bits for a host end's name, as upstream's
// "veth" + 8 hex digits. Unpredictable is not needed (a taken name is
// retried, see SetupVeth), so one getrandom call rather than crypto/rand,
// whose 30 packages every plugin linking pkg/ip (loopback included) would
// load and initialise at start, or math/rand/v2, one package more.
func randomVethName() string {
	var b [4]byte
	if _, err := unix.Getrandom(b[:], unix.GRND_NONBLOCK); err != nil {
		// The kernel's pool is not seeded yet (early boot): any bits do.
		binary.BigEndian.PutUint32(b[:], uint32(time.Now().UnixNano()))
	}
	return "veth" + hex.EncodeToString(b[:])
}

// PeerIndex returns the ifindex of a veth's peer, in whatever namespace the
// peer lives (IFLA_LINK).
func PeerIndex(h *netlink.Handle, link netlink.Link) (int, error) {
	if _, ok := link.(*netlink.Veth); !ok {
		return 0, fmt.Errorf("%q is a %s, not a veth", link.Attrs().Name, link.Type())
	}
	// ParentIndex carries IFLA_LINK, which for a veth is the peer's index.
	if idx := link.Attrs().ParentIndex; idx != 0 {
		return idx, nil
	}
	return 0, fmt.Errorf("%q: kernel reported no peer index", link.Attrs().Name)
}
