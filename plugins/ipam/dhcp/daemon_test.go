package dhcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/rpc"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
)

func inPool(ip net.IP) bool {
	v := ip.To4()
	return v != nil && v[0] == 10 && v[1] == 99 && v[2] == 0 && v[3] >= 10 && v[3] <= 50
}

var _ = Describe("an Allocate whose plugin is gone", func() {
	// A runtime's timeout kills the plugin mid-ADD: the runtime saw ADD
	// fail and will never DEL. The daemon used to finish the ADD anyway
	// and renew that lease for no one (issue 22).
	DescribeTable("keeps no lease and no record", func(after bool) {
		l := newLab()
		l.startDnsmasq()
		entered := make(chan struct{})
		done := make(chan error, 1)
		o := l.daemonOpts()
		hook := &o.beforeAcquire
		if after {
			hook = &o.afterAcquire
		}
		*hook = func(call context.Context) {
			close(entered)
			// Hold the acquisition until the connection is seen gone; the
			// bound only keeps a daemon without the fix from hanging.
			select {
			case <-call.Done():
			case <-time.After(10 * time.Second):
			}
		}
		o.allocated = func(err error) { done <- err }
		l.startDaemonWith(o)

		c, err := rpc.DialHTTP("unix", l.sock)
		Expect(err).NotTo(HaveOccurred())
		args := &skel.CmdArgs{ContainerID: "killed", Netns: l.contNS.Path(), IfName: "eth0",
			Path: "/opt/cni/bin", StdinData: []byte(l.conf("1.1.0", ""))}
		pending := c.Go("DHCP.Allocate", args, &current.Result{}, nil)
		Eventually(entered).WithTimeout(30 * time.Second).Should(BeClosed())
		Expect(c.Close()).To(Succeed()) // as the kernel does for a killed plugin
		Eventually(pending.Done).Should(Receive())

		var allocErr error
		Eventually(done).WithTimeout(60 * time.Second).Should(Receive(&allocErr))
		Expect(allocErr).To(MatchError(ContainSubstring("the plugin that asked for it is gone")))
		Expect(l.records()).To(BeEmpty())
		// Released, or never asked for.
		Eventually(l.leases).Should(BeEmpty(), func() string { return "dnsmasq holds a lease:\n" + l.dnsmasqLog() })
		if after {
			Expect(l.dnsmasqLog()).To(ContainSubstring("DHCPRELEASE(" + labBridge + ")"))
		}
	},
		Entry("gone before the lease is asked for: none is", false),
		Entry("gone while the lease is acquired: it is released", true),
	)
})

var _ = Describe("ADD and DEL against dnsmasq", func() {
	var l *lab
	BeforeEach(func() { l = newServedLab() })

	DescribeTableSubtree("each spec version", func(ver string) {
		It("gets a lease from the pool, persists it, and DEL releases it", func() {
			out := l.call("ADD", "ctr1", l.conf(ver, ""))
			Expect(out.Err).To(BeNil())
			res := testutil.ParseResult(ver, out.Stdout)
			Expect(res.IPs).To(HaveLen(1))
			ip := res.IPs[0]
			Expect(inPool(ip.Address.IP)).To(BeTrue(), "%s", ip.Address.String())
			Expect(ip.Address.Mask).To(Equal(net.CIDRMask(24, 32)))
			Expect(ip.Gateway.String()).To(Equal(labGW))
			Expect(res.Routes).To(HaveLen(1))
			Expect(res.Routes[0].Dst.String()).To(Equal("0.0.0.0/0"))
			Expect(res.Routes[0].GW.String()).To(Equal(labGW))

			// The server holds it under upstream's client ID.
			lease := l.leases()[ip.Address.IP.String()]
			Expect(lease).NotTo(BeNil(), "dnsmasq lease file: %v", l.leases())
			var hexID []string
			for _, b := range []byte("ctr1/dhcpnet/eth0") {
				hexID = append(hexID, fmt.Sprintf("%02x", b))
			}
			Expect(lease[4]).To(Equal(strings.Join(hexID, ":")))
			Expect(l.records()).To(HaveLen(1))

			// An ADD retried gets the same lease back.
			again := l.call("ADD", "ctr1", l.conf(ver, ""))
			Expect(again.Err).To(BeNil())
			Expect(testutil.ParseResult(ver, again.Stdout).IPs[0].Address.String()).To(Equal(ip.Address.String()))

			Expect(l.call("DEL", "ctr1", l.conf(ver, "")).Err).To(BeNil())
			Eventually(l.leases).Should(Not(HaveKey(ip.Address.IP.String())), func() string { return "dnsmasq saw no RELEASE:\n" + l.dnsmasqLog() })
			Expect(l.dnsmasqLog()).To(ContainSubstring("DHCPRELEASE(" + labBridge + ") " + ip.Address.IP.String()))
			Expect(l.records()).To(BeEmpty())
			Expect(l.call("DEL", "ctr1", l.conf(ver, "")).Err).To(BeNil())
		})
	}, testutil.VersionEntries())

	It("speaks upstream's wire protocol: rpc.DialHTTP, DHCP.Allocate and DHCP.Release with the skel arguments", func() {
		// What upstream's plugin does, call for call.
		c, err := rpc.DialHTTP("unix", l.sock)
		Expect(err).NotTo(HaveOccurred())
		defer c.Close()
		args := &skel.CmdArgs{ContainerID: "up1", Netns: l.contNS.Path(), IfName: "eth0",
			Args: "K8S_POD_NAME=x", Path: "/opt/cni/bin", StdinData: []byte(l.conf("0.4.0", ""))}
		res := &current.Result{}
		Expect(c.Call("DHCP.Allocate", args, res)).To(Succeed())
		Expect(res.IPs).To(HaveLen(1))
		Expect(inPool(res.IPs[0].Address.IP)).To(BeTrue())
		Expect(l.leases()).To(HaveKey(res.IPs[0].Address.IP.String()))
		Expect(c.Call("DHCP.Release", args, &struct{}{})).To(Succeed())
		Eventually(l.leases).Should(BeEmpty())
	})

	It("works as the built binary bin/dhcp (plugin mode), as a runtime execs it", func() {
		c := testutil.Call{Command: "ADD", ContainerID: "bin1", Netns: l.contNS.Path(), IfName: "eth0", Stdin: []byte(l.conf("1.0.0", ""))}
		out := testutil.ExecIn(l.hostNS, "dhcp", c)
		Expect(out.Err).To(BeNil(), "%s", out.Stderr)
		Expect(inPool(testutil.ParseResult("1.0.0", out.Stdout).IPs[0].Address.IP)).To(BeTrue())
		c.Command = "DEL"
		out = testutil.ExecIn(l.hostNS, "dhcp", c)
		Expect(out.Err).To(BeNil(), "%s", out.Stderr)
		Expect(l.records()).To(BeEmpty())
	})

	It("refuses, before asking the daemon, a CNI_NETNS that is the plugin's own namespace", func() {
		// skel checks it only after ADD: the lease was taken for an
		// interface of the plugin's own namespace, the result printed,
		// then the error (issue 22). Here the plugin runs in contNS.
		for _, cmd := range []string{"ADD", "DEL"} {
			out := testutil.RunIn(l.contNS, Plugin, testutil.Call{Command: cmd, ContainerID: "ctr1",
				Netns: l.contNS.Path(), IfName: "eth0", Stdin: []byte(l.conf("1.1.0", ""))})
			Expect(out.Err).NotTo(BeNil(), cmd)
			Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetNS), cmd)
			Expect(out.Err.Msg).To(ContainSubstring("CNI_NETNS " + l.contNS.Path() + " is the plugin's own network namespace"))
			var one map[string]any
			Expect(json.Unmarshal(out.Stdout, &one)).To(Succeed(), "one JSON document: %s", out.Stdout)
			Expect(l.records()).To(BeEmpty(), cmd)
			Expect(l.leases()).To(BeEmpty(), cmd)
		}
	})

	It("DEL releases the lease with a config whose options no longer validate", func() {
		// A config edited between ADD and DEL must not keep the lease
		// renewed for good (issue 22): DEL needs the name and the socket.
		out := l.call("ADD", "ctr1", l.conf("1.1.0", ""))
		Expect(out.Err).To(BeNil())
		ip := testutil.ParseResult("1.1.0", out.Stdout).IPs[0].Address.IP.String()
		edited := l.conf("1.1.0", `, "request": [{"option": "no-such-option"}], "ipFamilies": ["ipx"]`)
		bad := l.call("ADD", "ctr2", edited)
		testutil.ExpectCode(bad, types.ErrInvalidNetworkConfig, "ADD still refuses it")
		Expect(l.call("DEL", "ctr1", edited).Err).To(BeNil())
		Expect(l.records()).To(BeEmpty())
		Eventually(l.leases).Should(Not(HaveKey(ip)), func() string { return "dnsmasq saw no RELEASE:\n" + l.dnsmasqLog() })
		Expect(l.call("DEL", "ctr1", edited).Err).To(BeNil())
	})

	It("does not hand an attachment's lease to the same IDs in another netns", func() {
		// The same container ID, network and ifname from another netns is
		// another interface (a runtime that reused an ID): its lease is
		// asked for on that interface, and the old one released.
		out := l.call("ADD", "ctr1", l.conf("1.1.0", ""))
		Expect(out.Err).To(BeNil())
		first := testutil.ParseResult("1.1.0", out.Stdout).IPs[0].Address.IP.String()
		other := testutil.NewNS()
		l.addPort("vh1", other, "eth0")
		otherMAC := testutil.Handle(other)
		link, err := otherMAC.LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		b := testutil.RunIn(l.hostNS, Plugin, testutil.Call{Command: "ADD", ContainerID: "ctr1",
			Netns: other.Path(), IfName: "eth0", Stdin: []byte(l.conf("1.1.0", ""))})
		Expect(b.Err).To(BeNil())
		second := testutil.ParseResult("1.1.0", b.Stdout).IPs[0].Address.IP.String()
		Expect(l.leases()).To(HaveKey(second))
		Expect(l.leases()[second][1]).To(Equal(link.Attrs().HardwareAddr.String()), "the server leased it to the other netns's eth0")
		Expect(l.dnsmasqLog()).To(ContainSubstring("DHCPRELEASE(" + labBridge + ") " + first))
		recs := l.records()
		Expect(recs).To(HaveLen(1))
		raw, err := os.ReadFile(recs[0])
		Expect(err).NotTo(HaveOccurred())
		var rec record
		Expect(json.Unmarshal(raw, &rec)).To(Succeed())
		Expect(rec.Netns).To(Equal(other.Path()))
	})

	It("gives two attachments two addresses", func() {
		other := testutil.NewNS()
		l.addPort("vh1", other, "eth0")
		a := l.call("ADD", "ctrA", l.conf("1.1.0", ""))
		Expect(a.Err).To(BeNil())
		b := testutil.RunIn(l.hostNS, Plugin, testutil.Call{Command: "ADD", ContainerID: "ctrB",
			Netns: other.Path(), IfName: "eth0", Stdin: []byte(l.conf("1.1.0", ""))})
		Expect(b.Err).To(BeNil())
		ra, rb := testutil.ParseResult("1.1.0", a.Stdout), testutil.ParseResult("1.1.0", b.Stdout)
		Expect(ra.IPs[0].Address.IP.Equal(rb.IPs[0].Address.IP)).To(BeFalse())
		Expect(l.leases()).To(HaveLen(2))
	})

	It("DEL succeeds when the netns is gone, and forgets the lease", func() {
		gone, cleanup := testutil.NewRemovableNS()
		l.addPort("vh2", gone, "eth0")
		c := testutil.Call{Command: "ADD", ContainerID: "ctrG", Netns: gone.Path(), IfName: "eth0", Stdin: []byte(l.conf("1.1.0", ""))}
		Expect(testutil.RunIn(l.hostNS, Plugin, c).Err).To(BeNil())
		cleanup()
		c.Command = "DEL"
		Expect(testutil.RunIn(l.hostNS, Plugin, c).Err).To(BeNil())
		Expect(l.records()).To(BeEmpty())
		Expect(testutil.RunIn(l.hostNS, Plugin, c).Err).To(BeNil())
	})

	It("STATUS is OK while the daemon answers", func() {
		Expect(l.call("STATUS", "", l.conf("1.1.0", "")).Err).To(BeNil())
	})

	It("refuses bad input with codes 6 (JSON), 1 (version), 4 (environment) and 7 (config)", func() {
		out := l.call("ADD", "ctr1", `{"cniVersion": "1.1.0", "name": `)
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(Equal(uint(types.ErrDecodingFailure)))

		out = l.call("ADD", "ctr1", l.conf("9.9.9", ""))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(Equal(uint(types.ErrIncompatibleCNIVersion)))

		out = testutil.RunIn(l.hostNS, Plugin, testutil.Call{Command: "ADD", ContainerID: "ctr1",
			IfName: "eth0", Stdin: []byte(l.conf("1.1.0", ""))}) // no CNI_NETNS
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(Equal(uint(types.ErrInvalidEnvironmentVariables)))

		out = l.call("ADD", "ctr1", l.conf("1.1.0", `, "priority": -5`))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(Equal(uint(types.ErrInvalidNetworkConfig)))
		Expect(out.Err.Msg).To(ContainSubstring("ipam.priority: -5"))
		Expect(l.leases()).To(BeEmpty())
	})

	It("fails an ADD on a missing interface, naming it, and keeps nothing", func() {
		out := testutil.RunIn(l.hostNS, Plugin, testutil.Call{Command: "ADD", ContainerID: "ctr1",
			Netns: l.contNS.Path(), IfName: "nosuch0", Stdin: []byte(l.conf("1.1.0", ""))})
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring(`"nosuch0"`))
		Expect(l.records()).To(BeEmpty())
	})
})

var _ = Describe("without a daemon", func() {
	var l *lab
	BeforeEach(func() { l = newLab() })

	It("STATUS fails with code 50 and ADD with code 11, naming the socket", func() {
		out := l.call("STATUS", "", l.conf("1.1.0", ""))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(Equal(result.CodeUnavailable))
		Expect(out.Err.Msg).To(ContainSubstring(l.sock))

		out = l.call("ADD", "ctr1", l.conf("1.1.0", ""))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(Equal(uint(types.ErrTryAgainLater)))
		Expect(out.Err.Msg).To(ContainSubstring(l.sock))
	})

	It("STATUS fails with code 50 on a stale socket file", func() {
		ln, err := net.Listen("unix", l.sock)
		Expect(err).NotTo(HaveOccurred())
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		Expect(ln.Close()).To(Succeed())
		_, err = os.Stat(l.sock)
		Expect(err).NotTo(HaveOccurred(), "the stale socket file must stay for this spec")

		out := l.call("STATUS", "", l.conf("1.1.0", ""))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(Equal(result.CodeUnavailable))
	})

	It("STATUS fails with code 50, not hangs, when something holds the socket but never answers", func() {
		ln, err := net.Listen("unix", l.sock) // accepts into its backlog, never answers
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(ln.Close)
		out := l.call("STATUS", "", l.conf("1.1.0", ""))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Code).To(Equal(result.CodeUnavailable))
	})
})
