package attach_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/attach/masquerade"
	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/owner"
	"github.com/cniforge/plugins/pkg/testutil"
)

type toyConf struct {
	attach.NetConf
	attach.Masq
	Panic string `json:"panic"` // "add", "undo" or "del"
}

// toy is a plugin on the frame: ADD puts a veth pair named after the
// attachment in the container; what the spec wants recorded goes to calls.
func toy(calls *[]string) attach.Plugin[*toyConf] {
	record := func(s string) { *calls = append(*calls, s) }
	return attach.Plugin[*toyConf]{
		Name:    "toy",
		Summary: "frame test plugin",
		IPAM:    ipam.Frame{},
		Parse: func(args *skel.CmdArgs) (*toyConf, error) {
			c := &toyConf{}
			if err := attach.Decode(args.StdinData, c); err != nil {
				return nil, err
			}
			if c.Panic == "parse" {
				panic("parse blew up")
			}
			return c, c.Masq.Validate()
		},
		Add: func(a *attach.Attachment, c *toyConf) (types.Result, error) {
			record("add")
			_, contH, err := a.Container()
			if err != nil {
				return nil, err
			}
			la := netlink.NewLinkAttrs()
			la.Name = a.Args.IfName
			if err := contH.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peer-" + a.Args.IfName}); err != nil {
				return nil, err
			}
			a.Undo.Push("delete veth", func() error {
				record("undo")
				if c.Panic == "undo" {
					panic("undo blew up")
				}
				return ip.DelLinkByName(contH, a.Args.IfName)
			})
			if err := a.Step("link"); err != nil {
				return nil, err
			}
			if c.Panic == "add" {
				var m map[string]int
				m["x"]++ // a nil map write: a real runtime panic
			}
			return &current.Result{CNIVersion: current.ImplementedSpecVersion,
				Interfaces: []*current.Interface{{Name: a.Args.IfName, Sandbox: a.Args.Netns}}}, nil
		},
		Del: func(a *attach.Attachment, c *toyConf) []error {
			record("del")
			if c.Panic == "del" {
				panic("del blew up")
			}
			_, err := ip.DeleteContainerVeth(a.Args.Netns, a.Args.IfName, a.Alias())
			return []error{err}
		},
		Check: func(a *attach.Attachment, c *toyConf, prev *current.Result) error {
			record("check")
			contNS, contH, err := a.Container()
			if err != nil {
				return err
			}
			_, err = attach.CheckLink(contNS, contH, a.Args.IfName, "veth", false)
			return err
		},
		GC: func(a *attach.Attachment, c *toyConf, keep []owner.Owner) []error {
			record("gc")
			return nil
		},
		Masq: masquerade.Frame{},
	}
}

// fakeIPAM writes an IPAM plugin "fake-ipam" into a new folder, a shell
// script running body, and returns the folder (for CNI_PATH).
func fakeIPAM(body string) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	Expect(os.WriteFile(filepath.Join(dir, "fake-ipam"), []byte("#!/bin/sh\n"+body+"\n"), 0o755)).To(Succeed())
	return dir
}

var _ = Describe("the frame", func() {
	var (
		hostNS, contNS *ns.NetNS
		calls          []string
	)
	BeforeEach(func() {
		hostNS = testutil.NewNS()
		contNS = testutil.NewNS()
		calls = nil
	})
	conf := func(extra string) []byte {
		s := `{"cniVersion": "1.1.0", "name": "toynet", "type": "toy"`
		if extra != "" {
			s += ", " + extra
		}
		return []byte(s + "}")
	}
	run := func(hooks attach.Hooks, c testutil.Call) testutil.Output {
		GinkgoHelper()
		if c.ContainerID == "" && c.Command != "GC" && c.Command != "STATUS" {
			c.ContainerID = "c1"
		}
		if c.IfName == "" && c.Command != "GC" && c.Command != "STATUS" {
			c.IfName = "toy0"
		}
		return testutil.RunIn(hostNS, toy(&calls).Descriptor(hooks), c)
	}

	It("runs ADD, CHECK, DEL", func() {
		out := run(attach.Hooks{}, testutil.Call{Command: "ADD", Netns: contNS.Path(), Stdin: conf("")})
		Expect(out.Err).To(BeNil())
		Expect(testutil.LinkNames(contNS)).To(ContainElement("toy0"))
		out = run(attach.Hooks{}, testutil.Call{Command: "CHECK", Netns: contNS.Path(), Stdin: testutil.WithPrev(conf(""), out.Stdout)})
		Expect(out.Err).To(BeNil())
		out = run(attach.Hooks{}, testutil.Call{Command: "DEL", Netns: contNS.Path(), Stdin: conf("")})
		Expect(out.Err).To(BeNil())
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
		Expect(calls).To(Equal([]string{"add", "check", "del"}))
	})

	It("recovers a panic in ADD into code 999, rolls back and prints one error JSON", func() {
		out := run(attach.Hooks{}, testutil.Call{Command: "ADD", Netns: contNS.Path(), Stdin: conf(`"panic": "add"`)})
		testutil.ExpectCode(out, types.ErrInternal)
		Expect(out.Err.Msg).To(ContainSubstring("panic: assignment to entry in nil map"))
		Expect(calls).To(Equal([]string{"add", "undo"}))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
		var e types.Error
		Expect(json.Unmarshal(out.Stdout, &e)).To(Succeed(), "stdout must be one JSON document: %s", out.Stdout)
		Expect(out.Stdout).NotTo(ContainSubstring("goroutine"))
	})

	It("answers a panic in Parse with code 999 on every verb", func() {
		for _, cmd := range []string{"ADD", "CHECK", "DEL", "GC", "STATUS"} {
			out := run(attach.Hooks{}, testutil.Call{Command: cmd, Netns: contNS.Path(), Stdin: conf(`"panic": "parse"`)})
			Expect(out.Err).NotTo(BeNil(), cmd)
			Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInternal), cmd)
			Expect(out.Err.Msg).To(ContainSubstring("parse blew up"), cmd)
		}
	})

	It("rolls back when the step hook fails or panics, and reports the first error", func() {
		out := run(attach.Hooks{AfterStep: func(string) error { return errors.New("injected") }},
			testutil.Call{Command: "ADD", Netns: contNS.Path(), Stdin: conf("")})
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("injected"))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))

		out = run(attach.Hooks{AfterStep: func(string) error { panic("hook panicked") }},
			testutil.Call{Command: "ADD", Netns: contNS.Path(), Stdin: conf("")})
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInternal))
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
	})

	It("keeps the original error when an undo step panics", func() {
		out := run(attach.Hooks{AfterStep: func(string) error { return errors.New("injected") }},
			testutil.Call{Command: "ADD", Netns: contNS.Path(), Stdin: conf(`"panic": "undo"`)})
		Expect(out.Err.Msg).To(ContainSubstring("injected"))
		Expect(calls).To(Equal([]string{"add", "undo"}))
	})

	It("refuses the plugin's own namespace as CNI_NETNS with code 8 before any change", func() {
		for _, cmd := range []string{"ADD", "CHECK", "DEL"} {
			stdin := conf("")
			if cmd == "CHECK" {
				stdin = conf(`"prevResult": {"cniVersion": "1.1.0"}`)
			}
			out := run(attach.Hooks{}, testutil.Call{Command: cmd, Netns: hostNS.Path(), Stdin: stdin})
			Expect(out.Err).NotTo(BeNil(), cmd)
			Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetNS), cmd)
			Expect(out.Err.Msg).To(ContainSubstring(hostNS.Path()), cmd)
			Expect(out.Err.Msg).To(ContainSubstring("own network namespace"), cmd)
		}
		Expect(calls).To(BeEmpty())
		Expect(testutil.LinkNames(hostNS)).To(ConsistOf("lo"))
	})

	It("lets CNI_NETNS_OVERRIDE run ADD in the plugin's own namespace, as skel does", func() {
		out := run(attach.Hooks{}, testutil.Call{Command: "ADD", Netns: hostNS.Path(), Stdin: conf(""),
			Env: map[string]string{"CNI_NETNS_OVERRIDE": "1"}})
		Expect(out.Err).To(BeNil())
		Expect(testutil.LinkNames(hostNS)).To(ContainElement("toy0"))
	})

	It("runs DEL whatever prevResult holds, and never parses it", func() {
		out := run(attach.Hooks{}, testutil.Call{Command: "ADD", Netns: contNS.Path(), Stdin: conf("")})
		Expect(out.Err).To(BeNil())
		for _, prev := range []string{`{"cniVersion": "9.9.9"}`, `"not an object"`, `{"cniVersion": "1.1.0", "ips": 7}`} {
			out = run(attach.Hooks{}, testutil.Call{Command: "DEL", Netns: contNS.Path(), Stdin: conf(`"prevResult": ` + prev)})
			Expect(out.Err).To(BeNil(), prev)
		}
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
	})

	It("refuses CHECK without prevResult with code 7, and an unparseable one with code 6", func() {
		out := run(attach.Hooks{}, testutil.Call{Command: "CHECK", Netns: contNS.Path(), Stdin: conf("")})
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(out.Err.Msg).To(ContainSubstring("prevResult: missing"))
		out = run(attach.Hooks{}, testutil.Call{Command: "CHECK", Netns: contNS.Path(), Stdin: conf(`"prevResult": {"cniVersion": "1.1.0", "ips": 7}`)})
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrDecodingFailure))
		// Of another version than the config: code 1 (pkg/result.ParsePrev).
		out = run(attach.Hooks{}, testutil.Call{Command: "CHECK", Netns: contNS.Path(), Stdin: conf(`"prevResult": {"cniVersion": "9.9.9"}`)})
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrIncompatibleCNIVersion))
		Expect(calls).To(BeEmpty())
	})

	It("turns a panic in DEL into code 999 and still releases IPAM", func() {
		released := filepath.Join(GinkgoT().TempDir(), "released")
		dir := fakeIPAM(`[ "$CNI_COMMAND" = DEL ] && touch "` + released + `"; exit 0`)
		out := run(attach.Hooks{}, testutil.Call{Command: "DEL", Netns: contNS.Path(), Path: dir,
			Stdin: conf(`"panic": "del", "ipam": {"type": "fake-ipam"}`)})
		testutil.ExpectCode(out, types.ErrInternal)
		Expect(out.Err.Msg).To(ContainSubstring("del blew up"))
		Expect(released).To(BeAnExistingFile())
	})

	DescribeTable("releases IPAM on DEL after the plugin's steps, but dhcp while the interface it releases on exists",
		func(ipamType, want string) {
			// The IPAM delegate is this test binary (seenipam_test.go): on
			// DEL it reads the interface over netlink and writes what it saw.
			seen := filepath.Join(GinkgoT().TempDir(), "seen")
			GinkgoT().Setenv(seenEnv, seen)
			dir := GinkgoT().TempDir()
			self, err := os.Executable()
			Expect(err).NotTo(HaveOccurred())
			Expect(os.Symlink(self, filepath.Join(dir, ipamType))).To(Succeed())
			Expect(run(attach.Hooks{}, testutil.Call{Command: "ADD", Netns: contNS.Path(), Stdin: conf("")}).Err).To(BeNil())
			out := run(attach.Hooks{}, testutil.Call{Command: "DEL", Netns: contNS.Path(), Path: dir,
				Stdin: conf(`"ipam": {"type": "` + ipamType + `"}`)})
			Expect(out.Err).To(BeNil())
			b, rerr := os.ReadFile(seen)
			Expect(rerr).NotTo(HaveOccurred())
			Expect(string(b)).To(Equal(want+"\n"), "the container interface at IPAM DEL")
			Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
		},
		Entry("host-local and the rest: last", "fake-ipam", "gone"),
		Entry("dhcp: first, its RELEASE goes out on the interface", "dhcp", "present"),
	)

	It("refuses an IPAM type missing from CNI_PATH with code 7 before any change", func() {
		out := run(attach.Hooks{}, testutil.Call{Command: "ADD", Netns: contNS.Path(), Path: GinkgoT().TempDir(),
			Stdin: conf(`"ipam": {"type": "no-such-ipam"}`)})
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring(`ipam.type: "no-such-ipam" not found`))
		Expect(calls).To(BeEmpty())
	})

	It("delegates nothing for a plugin without Plugin.IPAM, whatever ipam says, as upstream's loopback and chained plugins", func() {
		// The delegate would record every verb; an IPAM type that is not
		// in CNI_PATH is no error either: the plugin never looks for it.
		record := filepath.Join(GinkgoT().TempDir(), "called")
		dir := fakeIPAM(`echo "$CNI_COMMAND" >> ` + record + `; echo '{"cniVersion": "1.1.0", "ips": [{"address": "10.1.2.3/24"}]}'`)
		p := toy(&calls)
		p.IPAM = nil
		call := func(cmd, ipamType string, stdin []byte) testutil.Output {
			GinkgoHelper()
			c := testutil.Call{Command: cmd, Netns: contNS.Path(), Path: dir, Stdin: stdin}
			if cmd != "GC" && cmd != "STATUS" {
				c.ContainerID, c.IfName = "c1", "toy0"
			}
			return testutil.RunIn(hostNS, p.Descriptor(attach.Hooks{}), c)
		}
		for _, ipamType := range []string{"fake-ipam", "no-such-ipam"} {
			ipamConf := conf(`"ipam": {"type": "` + ipamType + `"}`)
			out := call("ADD", ipamType, ipamConf)
			Expect(out.Err).To(BeNil(), ipamType)
			Expect(call("CHECK", ipamType, testutil.WithPrev(ipamConf, out.Stdout)).Err).To(BeNil(), ipamType)
			Expect(call("DEL", ipamType, ipamConf).Err).To(BeNil(), ipamType)
			Expect(call("GC", ipamType, conf(`"ipam": {"type": "`+ipamType+`"}, "cni.dev/valid-attachments": []`)).Err).To(BeNil(), ipamType)
			Expect(call("STATUS", ipamType, ipamConf).Err).To(BeNil(), ipamType)
		}
		Expect(record).NotTo(BeAnExistingFile())
		Expect(calls).To(Equal([]string{"add", "check", "del", "gc", "add", "check", "del", "gc"}))
	})

	It("fails every command with code 999 for a config embedding Masq without Plugin.Masq, before any change", func() {
		p := toy(&calls)
		p.Masq = nil
		for _, cmd := range []string{"ADD", "DEL"} {
			out := testutil.RunIn(hostNS, p.Descriptor(attach.Hooks{}),
				testutil.Call{Command: cmd, ContainerID: "c1", IfName: "toy0", Netns: contNS.Path(), Stdin: conf("")})
			Expect(out.Err).NotTo(BeNil(), cmd)
			Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInternal), cmd)
			Expect(out.Err.Msg).To(ContainSubstring("embeds Masq but Plugin.Masq is nil"), cmd)
		}
		Expect(calls).To(BeEmpty())
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))
	})

	It("answers 999 with the delegate's stderr when IPAM fails with only stderr", func() {
		dir := fakeIPAM(`echo "disk on fire" >&2; exit 1`)
		out := run(attach.Hooks{}, testutil.Call{Command: "STATUS", Path: dir, Stdin: conf(`"ipam": {"type": "fake-ipam"}`)})
		testutil.ExpectCode(out, types.ErrInternal)
		Expect(out.Err.Msg).To(ContainSubstring("disk on fire"))
	})

	It("runs GC and STATUS with only CNI_COMMAND and CNI_PATH set", func() {
		for _, cmd := range []string{"GC", "STATUS"} {
			out := run(attach.Hooks{}, testutil.Call{Command: cmd, Stdin: conf(`"cni.dev/valid-attachments": []`)})
			Expect(out.Err).To(BeNil(), cmd)
		}
		Expect(calls).To(Equal([]string{"gc"}))
	})

	It("answers STATUS with code 50 when the chosen masquerade backend cannot be used", func() {
		// No iptables-restore on PATH: the iptables backend is unusable.
		noTools := GinkgoT().TempDir()
		env := map[string]string{"PATH": noTools}
		out := run(attach.Hooks{}, testutil.Call{Command: "STATUS", Env: env, Stdin: conf(`"ipMasq": true, "ipMasqBackend": "iptables"`)})
		testutil.ExpectCode(out, 50)
		Expect(out.Err.Msg).To(ContainSubstring(`ipMasqBackend "iptables"`))
		// Without ipMasq the backend does not matter.
		out = run(attach.Hooks{}, testutil.Call{Command: "STATUS", Env: env, Stdin: conf(`"ipMasqBackend": "iptables"`)})
		Expect(out.Err).To(BeNil())
		out = run(attach.Hooks{}, testutil.Call{Command: "STATUS", Stdin: conf(`"ipMasq": true, "ipMasqBackend": "iptables"`)})
		Expect(out.Err).To(BeNil())
	})

	It("refuses a malformed GC list with code 7 and collects nothing", func() {
		out := run(attach.Hooks{}, testutil.Call{Command: "GC", Stdin: conf(`"cni.dev/valid-attachments": [null]`)})
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		Expect(calls).To(BeEmpty())
	})

	It("refuses an empty ipMasqBackend with code 7 on every verb", func() {
		for _, cmd := range []string{"ADD", "DEL", "GC", "STATUS"} {
			out := run(attach.Hooks{}, testutil.Call{Command: cmd, Netns: contNS.Path(), Stdin: conf(`"ipMasqBackend": ""`)})
			Expect(out.Err).NotTo(BeNil(), cmd)
			Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig), cmd)
		}
		Expect(calls).To(BeEmpty())
	})

	It("gives a chained plugin's ADD its prevResult, and refuses ADD without one (7) or with a broken one (6)", func() {
		var prevs []*current.Result
		p := toy(&calls)
		p.Chained = true
		// A chained plugin adjusts the interface that is there: it makes none.
		p.Add = func(a *attach.Attachment, c *toyConf) (types.Result, error) {
			prevs = append(prevs, a.Prev)
			return &current.Result{CNIVersion: current.ImplementedSpecVersion,
				Interfaces: []*current.Interface{{Name: a.Args.IfName, Sandbox: a.Args.Netns}}}, nil
		}
		chained := func(stdin []byte) testutil.Output {
			GinkgoHelper()
			return testutil.RunIn(hostNS, p.Descriptor(attach.Hooks{}),
				testutil.Call{Command: "ADD", ContainerID: "c1", IfName: "toy0", Netns: contNS.Path(), Stdin: stdin})
		}
		out := chained(conf(""))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring("prevResult: missing"))
		out = chained(conf(`"prevResult": {"cniVersion": "1.1.0", "ips": 7}`))
		testutil.ExpectCode(out, types.ErrDecodingFailure)
		out = chained(conf(`"prevResult": {"cniVersion": "9.9.9"}`))
		testutil.ExpectCode(out, types.ErrIncompatibleCNIVersion)
		Expect(calls).To(BeEmpty())
		Expect(testutil.LinkNames(contNS)).To(ConsistOf("lo"))

		// The interface to adjust must be in CNI_NETNS, where prevResult
		// puts it: code 7 naming it, before the plugin runs.
		good := conf(`"prevResult": {"cniVersion": "1.1.0", "ips": [{"version": "4", "address": "10.9.0.2/24"}]}`)
		out = chained(good)
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring(`no interface "toy0"`))
		Expect(testutil.ConnectNS(testutil.VethEnd{NS: contNS, Name: "toy0"}, testutil.VethEnd{NS: hostNS, Name: "toyh0"})).To(Succeed())
		out = chained(conf(`"prevResult": {"cniVersion": "1.1.0", "interfaces": [{"name": "toy0", "sandbox": "/run/netns/elsewhere"}]}`))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring(`"/run/netns/elsewhere"`))
		out = chained(conf(`"prevResult": {"cniVersion": "1.1.0", "interfaces": [{"name": "toy0", "sandbox": "` + hostNS.Path() + `"}]}`))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(prevs).To(BeEmpty())

		// A main plugin may spell the same namespace otherwise.
		other := filepath.Join(GinkgoT().TempDir(), "netns-link")
		Expect(os.Symlink(contNS.Path(), other)).To(Succeed())
		out = chained(conf(`"prevResult": {"cniVersion": "1.1.0", "interfaces": [{"name": "toy0", "sandbox": "` + other + `"}]}`))
		Expect(out.Err).To(BeNil())
		Expect(prevs).To(HaveLen(1))
		prevs = nil

		out = chained(good)
		Expect(out.Err).To(BeNil())
		Expect(prevs).To(HaveLen(1))
		Expect(prevs[0].IPs).To(HaveLen(1))
		Expect(prevs[0].IPs[0].Address.String()).To(Equal("10.9.0.2/24"))
	})
})
