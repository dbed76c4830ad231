package loopback_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/loopback"
)

func conf(ver string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion": %q, "name": "lo-net", "type": "loopback"}`, ver))
}

// run invokes the plugin in-process from inside hostNS.
func run(hostNS *ns.NetNS, c testutil.Call) testutil.Output {
	GinkgoHelper()
	return testutil.RunIn(hostNS, loopback.Plugin, c)
}

// loIn returns a handle on n (closed when the spec ends) and n's lo.
func loIn(n *ns.NetNS) (*netlink.Handle, netlink.Link) {
	GinkgoHelper()
	h := testutil.Handle(n)
	lo, err := h.LinkByName("lo")
	Expect(err).NotTo(HaveOccurred())
	return h, lo
}

func loUp(n *ns.NetNS) bool {
	GinkgoHelper()
	_, lo := loIn(n)
	return lo.Attrs().Flags&net.FlagUp != 0
}

func setLo(n *ns.NetNS, up bool) {
	GinkgoHelper()
	h, lo := loIn(n)
	if up {
		Expect(h.LinkSetUp(lo)).To(Succeed())
	} else {
		Expect(h.LinkSetDown(lo)).To(Succeed())
	}
}

var _ = Describe("loopback", func() {
	var hostNS, contNS *ns.NetNS

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		contNS = testutil.NewNS()
		setLo(contNS, false) // a fresh container starts with lo down
	})

	call := func(cmd, ver string) testutil.Call {
		return testutil.Call{Command: cmd, ContainerID: "c1", Netns: contNS.Path(), IfName: "lo", Stdin: conf(ver)}
	}

	DescribeTableSubtree("every spec version", func(ver string) {
		It("brings lo up and reports it in the requested version", func() {
			out := run(hostNS, call("ADD", ver))
			Expect(out.Err).To(BeNil())
			Expect(loUp(contNS)).To(BeTrue())

			cur := testutil.ParseResult(ver, out.Stdout)
			var addrs []string
			for _, ipc := range cur.IPs {
				addrs = append(addrs, ipc.Address.String())
			}
			Expect(addrs).To(ContainElement("127.0.0.1/8"))
			if testutil.AtLeast(ver, "0.3.0") {
				Expect(cur.Interfaces).To(HaveLen(1))
				Expect(cur.Interfaces[0].Name).To(Equal("lo"))
				Expect(cur.Interfaces[0].Sandbox).To(Equal(contNS.Path()))
			}
		})

		It("survives ADD, CHECK, DEL, DEL", func() {
			Expect(run(hostNS, call("ADD", ver)).Err).To(BeNil())
			if testutil.AtLeast(ver, "0.4.0") {
				Expect(run(hostNS, call("CHECK", ver)).Err).To(BeNil())
			}
			Expect(run(hostNS, call("DEL", ver)).Err).To(BeNil())
			Expect(loUp(contNS)).To(BeFalse())
			Expect(run(hostNS, call("DEL", ver)).Err).To(BeNil())
		})

		It("succeeds on DEL without a netns", func() {
			c := call("DEL", ver)
			c.Netns = ""
			Expect(run(hostNS, c).Err).To(BeNil())
		})
	}, testutil.VersionEntries())

	It("reports the results in 0.3.x/0.4.0 with a per-IP version", func() {
		for _, ver := range []string{"0.3.0", "0.3.1", "0.4.0"} {
			out := run(hostNS, call("ADD", ver))
			Expect(out.Err).To(BeNil())
			var raw struct {
				IPs []map[string]any `json:"ips"`
			}
			Expect(json.Unmarshal(out.Stdout, &raw)).To(Succeed())
			Expect(raw.IPs).NotTo(BeEmpty())
			for _, ipc := range raw.IPs {
				Expect(ipc).To(HaveKey("version"), "version %s", ver)
			}
		}
	})

	It("passes prevResult through when chained", func() {
		stdin := []byte(`{"cniVersion": "1.0.0", "name": "lo-net", "type": "loopback",
			"prevResult": {"cniVersion": "1.0.0",
				"interfaces": [{"name": "eth0", "sandbox": "/x"}],
				"ips": [{"address": "10.9.0.2/24", "interface": 0}]}}`)
		out := run(hostNS, testutil.Call{Command: "ADD", ContainerID: "c1", Netns: contNS.Path(), IfName: "lo", Stdin: stdin})
		Expect(out.Err).To(BeNil())
		Expect(loUp(contNS)).To(BeTrue())
		res, err := current.NewResult(out.Stdout)
		Expect(err).NotTo(HaveOccurred())
		cur := res.(*current.Result)
		Expect(cur.IPs).To(HaveLen(1))
		Expect(cur.IPs[0].Address.String()).To(Equal("10.9.0.2/24"))
		Expect(cur.Interfaces[0].Name).To(Equal("eth0"))
	})

	It("fails CHECK when lo is down", func() {
		Expect(run(hostNS, call("ADD", "1.1.0")).Err).To(BeNil())
		setLo(contNS, false)
		out := run(hostNS, call("CHECK", "1.1.0"))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring(`"lo" is down`))
	})

	It("succeeds on DEL when the netns is gone", func() {
		gone, cleanup := testutil.NewRemovableNS()
		c := call("ADD", "1.1.0")
		c.Netns = gone.Path()
		Expect(run(hostNS, c).Err).To(BeNil())
		cleanup()

		c.Command = "DEL"
		Expect(run(hostNS, c).Err).To(BeNil())
		Expect(run(hostNS, c).Err).To(BeNil())
	})

	It("succeeds on DEL when the netns path is no longer a namespace", func() {
		// What a runtime leaves after unmounting a namespace it then lost.
		stale := GinkgoT().TempDir() + "/netns"
		Expect(os.WriteFile(stale, nil, 0o644)).To(Succeed())
		c := call("DEL", "1.1.0")
		c.Netns = stale
		Expect(run(hostNS, c).Err).To(BeNil())
	})

	It("succeeds on GC and STATUS", func() {
		Expect(run(hostNS, call("STATUS", "1.1.0")).Err).To(BeNil())
		gc := call("GC", "1.1.0")
		gc.Stdin = []byte(`{"cniVersion": "1.1.0", "name": "lo-net", "type": "loopback", "cni.dev/valid-attachments": []}`)
		Expect(run(hostNS, gc).Err).To(BeNil())
	})

	It("runs DEL whatever prevResult holds: it never parses it", func() {
		Expect(run(hostNS, call("ADD", "1.1.0")).Err).To(BeNil())
		c := call("DEL", "1.1.0")
		c.Stdin = []byte(`{"cniVersion": "1.1.0", "name": "lo-net", "type": "loopback", "prevResult": {"cniVersion": "9.9.9"}}`)
		Expect(run(hostNS, c).Err).To(BeNil())
		Expect(loUp(contNS)).To(BeFalse())
	})

	It("reports a netns path DEL cannot open for another reason than it being gone, with code 8", func() {
		file := GinkgoT().TempDir() + "/file"
		Expect(os.WriteFile(file, nil, 0o644)).To(Succeed())
		c := call("DEL", "1.1.0")
		c.Netns = file + "/netns" // ENOTDIR: not "gone", a wrong path
		out := run(hostNS, c)
		testutil.ExpectCode(out, types.ErrInvalidNetNS)
		Expect(out.Err.Msg).To(ContainSubstring(c.Netns))
	})

	It("parses the config on CHECK", func() {
		Expect(run(hostNS, call("ADD", "1.1.0")).Err).To(BeNil())
		c := call("CHECK", "1.1.0")
		c.Stdin = []byte(`{"cniVersion": "1.1.0", "name": "lo-net", "type": "loopback", "dns": 7}`)
		out := run(hostNS, c)
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring("dns: 7 is not an object"))
	})

	It("runs GC and STATUS as the built binary with only CNI_COMMAND and CNI_PATH set", func() {
		for _, cmd := range []string{"GC", "STATUS"} {
			out := testutil.ExecIn(hostNS, "loopback", testutil.Call{Command: cmd, Stdin: conf("1.1.0")})
			Expect(out.Err).To(BeNil(), "%s: stderr %s", cmd, out.Stderr)
		}
	})

	Describe("bad input", func() {
		testutil.RefusalSpecs(func(c testutil.Call) testutil.Output { return run(hostNS, c) },
			func(ver string) testutil.Call { return call("ADD", ver) },
			func() { Expect(loUp(contNS)).To(BeFalse()) })
		It("rejects a config without a name with code 7", func() {
			c := call("ADD", "1.1.0")
			c.Stdin = []byte(`{"cniVersion": "1.1.0", "type": "loopback"}`)
			out := run(hostNS, c)
			testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
			Expect(loUp(contNS)).To(BeFalse())
		})
		It("rejects a path that is not a netns with code 8", func() {
			c := call("ADD", "1.1.0")
			c.Netns = "/proc/self/status"
			out := run(hostNS, c)
			testutil.ExpectCode(out, types.ErrInvalidNetNS)
			Expect(out.Err.Msg).To(ContainSubstring("/proc/self/status"))
		})
	})

	It("prints its about text with the suite version when run without CNI_COMMAND", func() {
		out, err := testutil.Exec("loopback", testutil.Call{})
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Err).To(BeNil())
		Expect(string(out.Stderr)).To(MatchRegexp(`CNI loopback plugin \S+ \(cniforge\)`))
		Expect(string(out.Stderr)).NotTo(ContainSubstring("plugin unknown"))
		Expect(string(out.Stderr)).To(ContainSubstring("CNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0"))
	})

	It("works as the built binary", func() {
		out := testutil.ExecIn(hostNS, "loopback", call("ADD", "1.1.0"))
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		Expect(loUp(contNS)).To(BeTrue())
		h, err := contNS.Handle()
		Expect(err).NotTo(HaveOccurred())
		defer h.Close()
		addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
		Expect(err).NotTo(HaveOccurred())
		Expect(addrs).NotTo(BeEmpty())
	})
})
