package portmap_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/portmap"
)

const (
	netName  = "pm-net"
	hostIf   = "pmveth0"
	hostGW4  = "10.88.0.1"
	contIP4  = "10.88.0.2"
	hostGW6  = "fd88::1"
	contIP6  = "fd88::2"
	hostIP4  = testutil.OutsideHostAddr // the host's address the outside reaches
	hostIP6  = "fd99::1"
	outIP6   = "fd99::2"
	otherIP4 = "10.99.0.3" // a second host address on the outside link
)

// env is a stand-in host with a container behind a veth (as a main plugin
// would have made it) and an outside namespace on another host link.
type env struct {
	host, cont, outside *ns.NetNS
}

func newEnv() env {
	GinkgoHelper()
	e := env{host: testutil.NewNS(), cont: testutil.NewNS()}
	Expect(testutil.ConnectNS(
		testutil.VethEnd{NS: e.host, Name: hostIf, Addrs: []string{hostGW4 + "/24", hostGW6 + "/64"}},
		testutil.VethEnd{NS: e.cont, Name: "eth0", Addrs: []string{contIP4 + "/24", contIP6 + "/64"}},
	)).To(Succeed())
	e.outside = testutil.NewOutside(e.host)
	hh := testutil.Handle(e.host)
	out0, err := hh.LinkByName("out0")
	Expect(err).NotTo(HaveOccurred())
	for _, a := range []string{hostIP6 + "/64", otherIP4 + "/24"} {
		addr, err := netlink.ParseAddr(a)
		Expect(err).NotTo(HaveOccurred())
		addr.Flags = unix.IFA_F_NODAD
		Expect(hh.AddrAdd(out0, addr)).To(Succeed())
	}
	oh := testutil.Handle(e.outside)
	oeth, err := oh.LinkByName("eth0")
	Expect(err).NotTo(HaveOccurred())
	addr, err := netlink.ParseAddr(outIP6 + "/64")
	Expect(err).NotTo(HaveOccurred())
	addr.Flags = unix.IFA_F_NODAD
	Expect(oh.AddrAdd(oeth, addr)).To(Succeed())
	ch := testutil.Handle(e.cont)
	for _, gw := range []string{hostGW4, hostGW6} {
		Expect(ch.RouteAdd(&netlink.Route{Gw: net.ParseIP(gw)})).To(Succeed())
	}
	Expect(e.host.Do(func() error {
		if err := ip.SetSysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		return ip.SetSysctl("net/ipv6/conf/all/forwarding", "1")
	})).To(Succeed())
	return e
}

// prevResult is what a main plugin reported, in version ver.
func (e env) prevResult(ver string) json.RawMessage { return e.prev(ver, false) }

// prevResultV4 is prevResult with the IPv4 address only.
func (e env) prevResultV4(ver string) json.RawMessage { return e.prev(ver, true) }

// eth0Result is a main plugin's 1.1.0 result for eth0 in the netns at
// sandbox: ip4/24 through gw4 and ip6/64 through gw6.
func eth0Result(sandbox, ip4, gw4, ip6, gw6 string) *current.Result {
	idx := 0
	return &current.Result{
		CNIVersion: "1.1.0",
		Interfaces: []*current.Interface{{Name: "eth0", Sandbox: sandbox}},
		IPs: []*current.IPConfig{
			{Address: net.IPNet{IP: net.ParseIP(ip4).To4(), Mask: net.CIDRMask(24, 32)}, Gateway: net.ParseIP(gw4), Interface: &idx},
			{Address: net.IPNet{IP: net.ParseIP(ip6), Mask: net.CIDRMask(64, 128)}, Gateway: net.ParseIP(gw6), Interface: &idx},
		},
	}
}

func (e env) prev(ver string, v4only bool) json.RawMessage {
	GinkgoHelper()
	res := eth0Result(e.cont.Path(), contIP4, hostGW4, contIP6, hostGW6)
	if v4only || !testutil.AtLeast(ver, "0.3.0") {
		res.IPs = res.IPs[:1] // 0.1.0/0.2.0 carry one address per family; keep it simple
	}
	conv, err := res.GetAsVersion(ver)
	Expect(err).NotTo(HaveOccurred())
	b, err := json.Marshal(conv)
	Expect(err).NotTo(HaveOccurred())
	return b
}

type mapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

type confOpts struct {
	ver      string
	backend  string
	mappings []mapping
	prev     json.RawMessage
	extra    map[string]any
}

func (o confOpts) json() []byte {
	GinkgoHelper()
	c := map[string]any{"cniVersion": o.ver, "name": netName, "type": "portmap"}
	if o.backend != "" {
		c["backend"] = o.backend
	}
	if o.mappings != nil {
		c["runtimeConfig"] = map[string]any{"portMappings": o.mappings}
	}
	if o.prev != nil {
		c["prevResult"] = o.prev
	}
	for k, v := range o.extra {
		c[k] = v
	}
	b, err := json.Marshal(c)
	Expect(err).NotTo(HaveOccurred())
	return b
}

func call(cmd, id string, e env, stdin []byte) testutil.Call {
	return testutil.Call{Command: cmd, ContainerID: id, Netns: e.cont.Path(), IfName: "eth0", Stdin: stdin}
}

func run(e env, hooks attach.Hooks, c testutil.Call) testutil.Output {
	GinkgoHelper()
	return testutil.RunIn(e.host, portmap.New(hooks), c)
}

// tcpServe listens in n on addr ("ip:port") and answers every connection
// with reply. It stops at cleanup.
func tcpServe(n *ns.NetNS, addr, reply string) {
	GinkgoHelper()
	var l net.Listener
	Expect(n.Do(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})).To(Succeed())
	DeferCleanup(l.Close)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, reply) // best effort: the client reads it or fails the spec
			c.Close()
		}
	}()
}

// tcpGet connects from n to addr and returns what the server wrote. The
// dial's bound leaves room for several SYN retransmits (1 s, then 2 s,
// ...) on a loaded machine: with 3 s, one IPv6 forward failed once while
// other packages' tests filled both cores. A port that is not forwarded is
// refused at once, so the bound costs the negative checks nothing.
func tcpGet(n *ns.NetNS, addr string) (string, error) {
	var got string
	err := n.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b, err := io.ReadAll(c)
		got = string(b)
		return err
	})
	return got, err
}

// udpListener is a UDP socket listening in a test namespace.
type udpListener struct{ conn *net.UDPConn }

func udpListen(to *ns.NetNS, listen string) *udpListener {
	GinkgoHelper()
	var conn *net.UDPConn
	Expect(to.Do(func() error {
		a, err := net.ResolveUDPAddr("udp", listen)
		if err != nil {
			return err
		}
		conn, err = net.ListenUDP("udp", a)
		return err
	})).To(Succeed())
	DeferCleanup(conn.Close)
	return &udpListener{conn}
}

// send sends a few datagrams from `from` to dst and returns what l got
// ("" when nothing arrived within a bound).
func (l *udpListener) send(from *ns.NetNS, dst string) string {
	GinkgoHelper()
	Expect(from.Do(func() error {
		c, err := net.Dial("udp", dst)
		if err != nil {
			return err
		}
		defer c.Close()
		for range 3 {
			if _, err := c.Write([]byte("hello")); err != nil {
				return err
			}
		}
		return nil
	})).To(Succeed())
	return l.recv()
}

func (l *udpListener) recv() string {
	GinkgoHelper()
	_ = l.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, _, err := l.conn.ReadFromUDP(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ""
	}
	Expect(err).NotTo(HaveOccurred())
	for { // drain the rest of the burst
		_ = l.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, _, err := l.conn.ReadFromUDP(make([]byte, 64)); err != nil {
			break
		}
	}
	return string(buf[:n])
}

// netfilterState is the host's rule state as text: iptables nat and raw
// (both families) and the nftables ruleset.
func netfilterState(n *ns.NetNS) string {
	GinkgoHelper()
	var b strings.Builder
	Expect(n.Do(func() error {
		for _, cmd := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"}} {
			out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %w: %s", cmd, err, out)
			}
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "#") {
					continue
				}
				b.WriteString(l + "\n")
			}
		}
		return nil
	})).To(Succeed())
	return b.String()
}

// ruleState is netfilterState without the counters, which traffic moves.
func ruleState(n *ns.NetNS) string {
	GinkgoHelper()
	return counterRE.ReplaceAllString(netfilterState(n), "")
}

var counterRE = regexp.MustCompile(`\[\d+:\d+\]|counter packets \d+ bytes \d+`)

// forwards is the part of the state that names our chains, tables or sets.
func forwards(n *ns.NetNS) []string {
	GinkgoHelper()
	var out []string
	for _, l := range strings.Split(netfilterState(n), "\n") {
		if strings.Contains(l, "CNI-DN-") || strings.Contains(l, "dnat name") || strings.Contains(l, "net: "+netName) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// nsName is the name `ip -n` knows a test namespace by.
func nsName(n *ns.NetNS) string {
	return strings.TrimPrefix(n.Path(), testutil.NSDir+"/")
}

// dialFromOutside is a UDP socket in e's outside namespace, bound to
// port of testutil.OutsideAddr and connected to to (host:port): one flow,
// one conntrack entry, for as long as the spec writes on it.
func dialFromOutside(e env, port int, to string) *net.UDPConn {
	GinkgoHelper()
	var c *net.UDPConn
	Expect(e.outside.Do(func() error {
		raddr, err := net.ResolveUDPAddr("udp", to)
		if err != nil {
			return err
		}
		c, err = net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(testutil.OutsideAddr), Port: port}, raddr)
		return err
	})).To(Succeed())
	DeferCleanup(c.Close)
	return c
}
