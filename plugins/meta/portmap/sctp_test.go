package portmap_test

import (
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/kernelfeature"
	"github.com/cniforge/plugins/pkg/ns"
)

// SCTP traffic through a mapping, on each backend. Go has no SCTP, so
// these are one-to-one style sockets through raw syscalls. The CI host's
// kernel has no SCTP sockets: the spec runs in the VM lane.
var _ = DescribeTable("forwards an sctp mapping from outside", Label(kernelfeature.Label), func(backend string) {
	kernelfeature.Require(kernelfeature.SCTP)
	e := newEnv()
	sctpServe(e.cont, 9132, "from-container-sctp")
	stdin := confOpts{ver: "1.1.0", backend: backend, prev: e.prevResult("1.1.0"),
		mappings: []mapping{{HostPort: 132, ContainerPort: 9132, Protocol: "sctp"}}}.json()
	Expect(run(e, attach.Hooks{}, call("ADD", "c1", e, stdin)).Err).To(BeNil())
	Expect(sctpGet(e.outside, hostIP4, 132)).To(Equal("from-container-sctp"))
	Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
	Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
	Expect(forwards(e.host)).To(BeEmpty())
	_, err := sctpGet(e.outside, hostIP4, 132)
	Expect(err).To(HaveOccurred(), "nothing forwards after DEL")
}, backends)

// sctpServe listens in n on port and writes reply to every association.
func sctpServe(n *ns.NetNS, port int, reply string) {
	GinkgoHelper()
	var fd int
	Expect(n.Do(func() (err error) {
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP); err != nil {
			return err
		}
		if err = unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
			return err
		}
		return unix.Listen(fd, 4)
	})).To(Succeed())
	DeferCleanup(func() { _ = unix.Shutdown(fd, unix.SHUT_RDWR); _ = unix.Close(fd) })
	go func() {
		for {
			c, _, err := unix.Accept(fd)
			if err != nil {
				return
			}
			_, _ = unix.Write(c, []byte(reply)) // best effort: the client reads it or fails the spec
			_ = unix.Close(c)
		}
	}()
}

// sctpGet connects from n to ip:port and returns what the server wrote,
// within 2 s for the connect and for the read.
func sctpGet(n *ns.NetNS, ip string, port int) (string, error) {
	var got string
	err := n.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
		for _, opt := range []int{unix.SO_SNDTIMEO, unix.SO_RCVTIMEO} {
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv); err != nil {
				return err
			}
		}
		sa := &unix.SockaddrInet4{Port: port}
		copy(sa.Addr[:], net.ParseIP(ip).To4())
		if err := unix.Connect(fd, sa); err != nil {
			return err
		}
		buf := make([]byte, 256)
		k, err := unix.Read(fd, buf)
		if err != nil {
			return err
		}
		got = string(buf[:k])
		return nil
	})
	return got, err
}
