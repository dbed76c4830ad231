package tap_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

const netName = "tap-net"

// netOpts shapes the test network config.
type netOpts struct {
	ver        string
	dataDir    string // "" leaves ipam out: layer 2 only
	subnet     string // default 10.1.2.0/24
	oneIP      bool   // a range of one address, so that every ADD gets the same
	mac        string
	mtu        int
	multiQueue bool
	owner      *uint32
	group      *uint32
	bridge     string
	prevRes    []byte
	extraKeys  string
}

func (o netOpts) json() []byte {
	GinkgoHelper()
	conf := map[string]any{"cniVersion": o.ver, "name": netName, "type": "tap"}
	if o.dataDir != "" {
		subnet := o.subnet
		if subnet == "" {
			subnet = "10.1.2.0/24"
		}
		r := map[string]string{"subnet": subnet}
		if o.oneIP {
			r["rangeStart"], r["rangeEnd"] = "10.1.2.2", "10.1.2.2"
		}
		conf["ipam"] = map[string]any{"type": "host-local", "dataDir": o.dataDir,
			"ranges": [][]map[string]string{{r}}, "routes": []map[string]string{{"dst": "10.200.0.0/16"}}}
	}
	if o.mac != "" {
		conf["mac"] = o.mac
	}
	if o.mtu != 0 {
		conf["mtu"] = o.mtu
	}
	if o.multiQueue {
		conf["multiQueue"] = true
	}
	if o.owner != nil {
		conf["owner"] = *o.owner
	}
	if o.group != nil {
		conf["group"] = *o.group
	}
	if o.bridge != "" {
		conf["bridge"] = o.bridge
	}
	return testutil.MarshalConf(conf, o.extraKeys, o.prevRes)
}

func u32(v uint32) *uint32 { return &v }

// vm stands in for a VMM: it opens the tap ifName in n, as QEMU would
// (which brings its carrier up), and reads the frames the kernel sends it.
type vm struct{ f *os.File }

// openTap attaches one queue to the persistent tap ifName in n. The tap is
// closed (detached) at the end of the spec.
func openTap(n *ns.NetNS, ifName string, multiQueue bool) *vm {
	GinkgoHelper()
	var fd int
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies in n
		if err := unix.Setns(int(n.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			errc <- err
			return
		}
		ifr, err := unix.NewIfreq(ifName)
		if err != nil {
			errc <- err
			return
		}
		flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
		if multiQueue {
			flags |= unix.IFF_MULTI_QUEUE
		}
		ifr.SetUint16(flags)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			errc <- fmt.Errorf("attach to tap %s: %w", ifName, err)
			return
		}
		errc <- nil
	}()
	Expect(<-errc).To(Succeed())
	v := &vm{f: os.NewFile(uintptr(fd), "/dev/net/tun")}
	DeferCleanup(v.f.Close)
	return v
}

// arpRequestFor reads frames until an ARP request for target arrives, or
// the deadline passes; it returns the request's sender MAC and IP.
func (v *vm) arpRequestFor(target net.IP, within time.Duration) (net.HardwareAddr, net.IP, error) {
	GinkgoHelper()
	Expect(v.f.SetReadDeadline(time.Now().Add(within))).To(Succeed())
	buf := make([]byte, 65536)
	for {
		n, err := v.f.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, nil, fmt.Errorf("no ARP request for %s reached the tap", target)
		}
		if err != nil {
			return nil, nil, err
		}
		f := buf[:n]
		// Ethernet (14) + ARP (28): ethertype 0x0806, opcode 1 (request).
		if n < 42 || f[12] != 0x08 || f[13] != 0x06 || f[20] != 0 || f[21] != 1 {
			continue
		}
		if net.IP(f[38:42]).Equal(target.To4()) {
			return net.HardwareAddr(append([]byte(nil), f[22:28]...)), net.IP(append([]byte(nil), f[28:32]...)), nil
		}
	}
}

// sendUDP sends one datagram from inside n to dst:9, so that n resolves
// dst (an ARP request) first. The send itself succeeds whether or not
// anybody answers.
func sendUDP(n *ns.NetNS, dst string) error {
	return n.Do(func() error {
		c, err := net.Dial("udp4", net.JoinHostPort(dst, "9"))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		return err
	})
}

// answer serves, until the tap is closed, as a VM with mac and ip behind
// it: it answers ARP requests for ip and ICMP echo requests to ip.
func (v *vm) answer(mac net.HardwareAddr, ip net.IP) {
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := v.f.Read(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if err != nil {
				return // closed at the end of the spec
			}
			if reply := vmReply(buf[:n], mac, ip.To4()); reply != nil {
				_, _ = v.f.Write(reply) // a lost reply fails the ping that waits for it
			}
		}
	}()
}

// vmReply is the reply of a VM with mac and ip to frame f: an ARP reply
// to a request for ip, an echo reply to an ICMP echo request to ip, else
// nil.
func vmReply(f []byte, mac net.HardwareAddr, ip net.IP) []byte {
	if len(f) < 42 {
		return nil
	}
	switch {
	case f[12] == 0x08 && f[13] == 0x06 && f[20] == 0 && f[21] == 1 && net.IP(f[38:42]).Equal(ip):
		r := make([]byte, 42)
		copy(r[0:6], f[6:12])
		copy(r[6:12], mac)
		r[12], r[13] = 0x08, 0x06
		copy(r[14:20], []byte{0, 1, 0x08, 0x00, 6, 4}) // ethernet, IPv4
		r[20], r[21] = 0, 2                            // reply
		copy(r[22:28], mac)
		copy(r[28:32], ip)
		copy(r[32:38], f[22:28])
		copy(r[38:42], f[28:32])
		return r
	case f[12] == 0x08 && f[13] == 0x00:
		ihl := int(f[14]&0x0f) * 4
		total := int(f[16])<<8 | int(f[17])
		if f[23] != 1 || len(f) < 14+total || total < ihl+8 || !net.IP(f[30:34]).Equal(ip) || f[14+ihl] != 8 {
			return nil
		}
		r := append([]byte(nil), f[:14+total]...)
		copy(r[0:6], f[6:12])
		copy(r[6:12], mac)
		copy(r[26:30], f[30:34])
		copy(r[30:34], f[26:30])
		r[22] = 64 // TTL
		r[24], r[25] = 0, 0
		c := checksum(r[14 : 14+ihl])
		r[24], r[25] = byte(c>>8), byte(c)
		icmp := r[14+ihl:]
		icmp[0] = 0 // echo reply
		icmp[2], icmp[3] = 0, 0
		c = checksum(icmp)
		icmp[2], icmp[3] = byte(c>>8), byte(c)
		return r
	}
	return nil
}

// checksum is the Internet checksum (RFC 1071) of b.
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// withPrev returns o carrying res (printed in o.ver) as prevResult.
func (o netOpts) withPrev(res *current.Result) netOpts {
	GinkgoHelper()
	o.prevRes = testutil.PrintResult(res, o.ver)
	return o
}
