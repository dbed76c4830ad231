package nftnl

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/netfilter"
)

// nftConn is a lasting nftables connection together with its socket, on
// which this package sends its own single requests (a chain, the
// generation) between the connection's operations, so that one change
// opens, and closes, one nfnetlink socket (see conn.go for what a close
// costs). Not for concurrent use.
type NftConn struct {
	*nftables.Conn
	Nl *netlink.Conn
}

// newNFTConn opens a lasting nftables connection in the calling thread's
// network namespace, for callers that send no single requests of their own.
func NewNFTConn() (*nftables.Conn, error) {
	c, err := OpenNFT()
	if err != nil {
		return nil, err
	}
	return c.Conn, nil
}

// openNFT opens an nftConn in the calling thread's network namespace. The
// socket is created on the calling thread (nftables.Conn without NetNS
// dials in place), so it belongs to that namespace for its whole life,
// whichever thread later reads or writes it.
func OpenNFT() (*NftConn, error) {
	var nl *netlink.Conn
	c, err := nftables.New(nftables.AsLasting(), nftables.WithSockOptions(func(x *netlink.Conn) error {
		nl = x
		return nil
	}))
	if err != nil {
		return nil, fmt.Errorf("nftables netlink: %w", NftUnsupported(err))
	}
	if nl == nil {
		_ = c.CloseLasting() // best effort: nothing was sent on it
		return nil, errors.New("nftables netlink: the connection's socket was not handed over")
	}
	return &NftConn{Conn: c, Nl: nl}, nil
}

// nftUnsupported wraps err with ErrUnavailable when it says that this
// kernel has no nf_tables: no nfnetlink (EPROTONOSUPPORT), no nf_tables
// subsystem or family (EOPNOTSUPP, EAFNOSUPPORT). That is the one failure
// that proves no rule can exist; any other error (EPERM, ENOBUFS, a
// netlink that went away) says nothing about what the kernel holds, so
// callers must not read it as "nothing installed".
func NftUnsupported(err error) error {
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EAFNOSUPPORT) {
		return fmt.Errorf("%w: %w", netfilter.ErrUnavailable, err)
	}
	return err
}

// Usable reports whether nf_tables and its inet family work in the calling
// thread's namespace. It asks for the masquerade's table: there or not,
// the answer proves the same.
func Usable() error {
	// One GETTABLE of the inet family on the shared request socket: the
	// table there or not (ENOENT) proves nf_tables and its inet family
	// work, without a socket of its own to close (see conn.go).
	nl, done, err := RequestConn()
	if err != nil {
		return fmt.Errorf("nftables: %w: %w", netfilter.ErrUnavailable, err)
	}
	defer done()
	if _, err := NftTableExistsIn(nl, nftables.TableFamilyINet, "cni_plugins_masquerade"); err != nil {
		return fmt.Errorf("nftables: %w: %w", netfilter.ErrUnavailable, err)
	}
	return nil
}
