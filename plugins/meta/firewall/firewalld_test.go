package firewall_test

import (
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/firewall"
)

func zoneSources(bus, zone string) string {
	GinkgoHelper()
	out, err := testutil.FirewallCmd(bus, "--zone="+zone, "--list-sources")
	Expect(err).NotTo(HaveOccurred())
	return out
}

var _ = Describe("firewall on firewalld", Label("firewalld"), func() {
	var hostNS, contNS *ns.NetNS
	var bus string

	BeforeEach(func() {
		hostNS, contNS = testutil.NewNS(), testutil.NewNS()
		bus = testutil.StartFirewalld(hostNS)
	})

	DescribeTable("adds the container's address as a source of the zone, checks it and removes it",
		func(backend, zone string) {
			extra := fmt.Sprintf(`, "backend": %q`, backend)
			if zone != "trusted" {
				extra += fmt.Sprintf(`, "firewalldZone": %q`, zone)
			}
			stdin := conf("1.1.0", extra, prevResult("1.1.0", "br0", "10.77.0.2/24"))
			c := testutil.Call{Command: "ADD", ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Stdin: stdin,
				Env: map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": bus}}
			run := func(cmd string) testutil.Output {
				c.Command = cmd
				return testutil.RunIn(hostNS, firewall.Plugin, c)
			}
			Expect(run("ADD").Err).To(BeNil())
			Expect(zoneSources(bus, zone)).To(Equal("10.77.0.2"))
			Expect(filterRules(hostNS)).NotTo(ContainSubstring("10.77.0.2"), "firewalld, not iptables")
			Expect(run("CHECK").Err).To(BeNil())
			Expect(run("STATUS").Err).To(BeNil())
			c.Netns = ""
			Expect(run("DEL").Err).To(BeNil())
			Expect(zoneSources(bus, zone)).To(BeEmpty())
			Expect(run("DEL").Err).To(BeNil())
			c.Netns = contNS.Path()
			out := run("CHECK")
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg+out.Err.Details).To(ContainSubstring("source 10.77.0.2 is in no zone, want zone %q", zone), "%+v", out.Err)
		},
		Entry("backend absent or empty picks firewalld when it answers", "", "trusted"),
		Entry("backend firewalld, another zone", "firewalld", "public"),
	)

	It("leaves no source behind when ADD fails after its rules step", func() {
		p := firewall.New(attachHooksFailingAt(firewall.StepRules))
		c := testutil.Call{Command: "ADD", ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0",
			Stdin: conf("1.1.0", `, "backend": "firewalld"`, prevResult("1.1.0", "br0", "10.77.0.2/24")),
			Env:   map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": bus}}
		Expect(testutil.RunIn(hostNS, p, c).Err).NotTo(BeNil())
		Expect(zoneSources(bus, "trusted")).To(BeEmpty())
	})

	It("keeps a live attachment's source when a repeated ADD fails after its rules step", func() {
		c := testutil.Call{Command: "ADD", ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0",
			Stdin: conf("1.1.0", `, "backend": "firewalld"`, prevResult("1.1.0", "br0", "10.77.0.2/24")),
			Env:   map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": bus}}
		Expect(testutil.RunIn(hostNS, firewall.Plugin, c).Err).To(BeNil())
		Expect(zoneSources(bus, "trusted")).To(Equal("10.77.0.2"))
		Expect(testutil.RunIn(hostNS, firewall.New(attachHooksFailingAt(firewall.StepRules)), c).Err).NotTo(BeNil())
		Expect(zoneSources(bus, "trusted")).To(Equal("10.77.0.2"), "the source that was there stays")
	})
})

var _ = Describe("firewall without firewalld", func() {
	It("answers STATUS for backend firewalld with code 50, and picks iptables for an empty backend", func() {
		hostNS := testutil.NewNS()
		env := map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + filepath.Join(GinkgoT().TempDir(), "no-bus")}
		out := testutil.RunIn(hostNS, firewall.Plugin, testutil.Call{Command: "STATUS", Env: env, Stdin: conf("1.1.0", `, "backend": "firewalld"`, "")})
		testutil.ExpectCode(out, 50)
		Expect(out.Err.Msg).To(ContainSubstring(`backend: "firewalld"`))
		out = testutil.RunIn(hostNS, firewall.Plugin, testutil.Call{Command: "STATUS", Env: env, Stdin: conf("1.1.0", `, "backend": ""`, "")})
		Expect(out.Err).To(BeNil())
	})

	It("answers ADD and CHECK for backend firewalld with code 11 (try again later), not STATUS's 50, and DEL succeeds", func() {
		hostNS, contNS := testutil.NewNS(), testutil.NewNS()
		env := map[string]string{"DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + filepath.Join(GinkgoT().TempDir(), "no-bus")}
		stdin := conf("1.1.0", `, "backend": "firewalld"`, prevResult("1.1.0", "br0", "10.77.0.2/24"))
		for _, cmd := range []string{"ADD", "CHECK"} {
			out := testutil.RunIn(hostNS, firewall.Plugin, testutil.Call{Command: cmd, ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Env: env, Stdin: stdin})
			Expect(out.Err).NotTo(BeNil(), cmd)
			Expect(out.Err.Code).To(BeEquivalentTo(types.ErrTryAgainLater), cmd+": "+out.Err.Msg)
			Expect(out.Err.Msg).To(ContainSubstring(`backend: "firewalld"`), cmd)
		}
		out := testutil.RunIn(hostNS, firewall.Plugin, testutil.Call{Command: "DEL", ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Env: env, Stdin: stdin})
		Expect(out.Err).To(BeNil())
	})
})
