package testutil

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
)

// ARPListener records the gratuitous ARPs (requests whose sender and
// target address are the same) that arrive on one interface of a test
// namespace, tagged or not.
type ARPListener struct {
	fd   int
	stop atomic.Bool
	mu   sync.Mutex
	seen map[string]net.HardwareAddr // announced IPv4 -> sender MAC
	// more is closed (and replaced) when an announcement is recorded.
	more chan struct{}
	done chan struct{}
}

// ListenARP starts recording the gratuitous ARPs that reach ifName in n,
// or any interface of n for "" (one made later too). Close it when done.
func ListenARP(n *ns.NetNS, ifName string) (*ARPListener, error) {
	var fd int
	err := n.Do(func() error {
		index := 0
		if ifName != "" {
			iface, err := net.InterfaceByName(ifName)
			if err != nil {
				return err
			}
			index = iface.Index
		}
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: index}); err != nil {
			unix.Close(fd)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listen for ARP on %s in %s: %w", ifName, n.Path(), err)
	}
	// A read that wakes up now and then sees Close, which closes the
	// socket only once the reader is gone.
	tv := unix.Timeval{Usec: 100_000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	l := &ARPListener{fd: fd, seen: map[string]net.HardwareAddr{}, more: make(chan struct{}), done: make(chan struct{})}
	go l.read()
	return l, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (l *ARPListener) read() {
	defer close(l.done)
	buf := make([]byte, 2048)
	for {
		if l.stop.Load() {
			return
		}
		n, _, err := unix.Recvfrom(l.fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		l.record(buf[:n])
	}
}

// record notes frame when it is a gratuitous ARP request over Ethernet and
// IPv4, with or without one 802.1Q tag.
func (l *ARPListener) record(frame []byte) {
	if len(frame) < 14 {
		return
	}
	typ, p := binary.BigEndian.Uint16(frame[12:14]), frame[14:]
	if typ == 0x8100 && len(p) >= 4 {
		typ, p = binary.BigEndian.Uint16(p[2:4]), p[4:]
	}
	if typ != unix.ETH_P_ARP || len(p) < 28 || binary.BigEndian.Uint16(p[6:8]) != 1 {
		return
	}
	sha, spa, tpa := net.HardwareAddr(append([]byte(nil), p[8:14]...)), net.IP(p[14:18]), net.IP(p[24:28])
	if !spa.Equal(tpa) {
		return
	}
	l.mu.Lock()
	l.seen[spa.String()] = sha
	close(l.more)
	l.more = make(chan struct{})
	l.mu.Unlock()
}

// Announced waits up to timeout for a gratuitous ARP of ip and returns the
// MAC it announced; nil if none came. It wakes on each announcement
// recorded, not on a clock.
func (l *ARPListener) Announced(ip string, timeout time.Duration) net.HardwareAddr {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		mac, more := l.seen[ip], l.more
		l.mu.Unlock()
		if mac != nil {
			return mac
		}
		select {
		case <-more:
		case <-deadline.C:
			return nil
		}
	}
}

// Close stops recording.
func (l *ARPListener) Close() {
	l.stop.Store(true)
	<-l.done
	unix.Close(l.fd)
}
