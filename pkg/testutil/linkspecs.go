package testutil

import (
	"encoding/json"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
)

// LinkPlugin describes a link plugin (macvlan, ipvlan, vlan, dummy: one
// link made in the container through pkg/link, on a master or alone) to
// the specs they share: see NewLinkEnv.
type LinkPlugin struct {
	Plugin plugin.Plugin
	// WithStepHook returns the plugin with attach.Hooks{AfterStep: hook}
	// (a function, not attach.Hooks: see FailAfter).
	WithStepHook func(hook func(step string) error) plugin.Plugin
	AddSteps     []string
	// Kind is the container link's netlink type ("macvlan", "dummy", ...).
	Kind string
	// Conf is the plugin's test config of spec version ver, host-local
	// keeping its reservations in dataDir; LinkEnv.Conf merges keys over it.
	Conf func(ver, dataDir string) map[string]any
	// IPs is how many addresses Conf's IPAM hands one attachment.
	IPs int
	// Master is the master's name in the stand-in host, wired to "peer0"
	// in a peer namespace; "" for a plugin without a master (dummy): no
	// peer namespace then, and no master specs.
	Master string
	// PeerIP is the peer's address (/24) on the master's wire.
	PeerIP string
	// Wire connects master in masterNS to peer in peerNS so that PeerIP is
	// reached through master. Nil: a veth pair, PeerIP/24 on the peer end.
	Wire func(masterNS *ns.NetNS, master string, peerNS *ns.NetNS, peer string)
	// SecondKeys are merged over Conf for an attachment on the same master
	// beside another one (vlan: another VLAN ID, as the kernel keeps one
	// vlan per ID and master).
	SecondKeys map[string]any
	// Layer2 says the link comes up without addresses for "ipam": {} or no
	// "ipam" (false: the plugin requires ipam).
	Layer2 bool
	// BadInput are the plugin's own rows of the bad-input table, beside
	// the shared ones (not JSON, no CNI_NETNS, unsupported version,
	// missing master).
	BadInput []BadInput
	// EditedKeys, merged over Conf, make a config ADD refuses (code 7)
	// and DEL must still accept: a config edited between ADD and DEL may
	// not keep the attachment from being removed.
	EditedKeys map[string]any
}

// BadInput is one row of the bad-input table: an ADD that is refused
// with Code, the error naming Msg, and changes nothing.
type BadInput struct {
	Name string
	// Stdin is the raw config; nil: LinkEnv.Conf(Ver or "1.1.0", Keys).
	Stdin   []byte
	Ver     string
	Keys    map[string]any
	Args    string // CNI_ARGS
	NoNetns bool   // CNI_NETNS unset
	Code    int
	Msg     string
}

// LinkEnv is the world of one link-plugin spec: a stand-in host namespace
// (with the master, wired to a peer namespace), a container namespace and
// a host-local data folder, made afresh before each spec.
type LinkEnv struct {
	HostNS, ContNS, PeerNS *ns.NetNS // PeerNS: nil without a master
	DataDir                string
	p                      LinkPlugin
}

// NewLinkEnv registers, in the container it is called in, the BeforeEach
// that makes the env of each spec. Require kernel features in a BeforeEach
// registered before it. Register the shared specs with VersionSpecs (in a
// table over testutil.VersionEntries) and Specs.
func NewLinkEnv(p LinkPlugin) *LinkEnv {
	e := &LinkEnv{p: p}
	ginkgo.BeforeEach(func() {
		e.HostNS, e.ContNS, e.DataDir = NewNS(), NewNS(), ginkgo.GinkgoT().TempDir()
		e.PeerNS = nil
		if p.Master != "" {
			e.PeerNS = NewNS()
			e.Wire(e.HostNS, p.Master, e.PeerNS, "peer0")
		}
	})
	return e
}

// Wire connects master in masterNS to peer in peerNS as the plugin's Wire
// does: PeerIP is reached through master (a master inside the container,
// for linkInContainer, is wired the same way).
func (e *LinkEnv) Wire(masterNS *ns.NetNS, master string, peerNS *ns.NetNS, peer string) {
	ginkgo.GinkgoHelper()
	if e.p.Wire != nil {
		e.p.Wire(masterNS, master, peerNS, peer)
		return
	}
	gomega.Expect(ConnectNS(
		VethEnd{NS: masterNS, Name: master},
		VethEnd{NS: peerNS, Name: peer, Addrs: []string{e.p.PeerIP + "/24"}},
	)).To(gomega.Succeed())
}

// Conf is the plugin's config of version ver with keys merged over it (see
// MergeConf).
func (e *LinkEnv) Conf(ver string, keys ...map[string]any) []byte {
	ginkgo.GinkgoHelper()
	return MergeConf(e.p.Conf(ver, e.DataDir), keys...)
}

// LinkIPAM is the "ipam" of the link plugins' test configs: host-local
// handing out prefix.10 to prefix.50 of prefix.0/24 (prefix: three
// octets) with gateway prefix.1, a route to 10.200.0.0/16, and its
// reservations in dataDir.
func LinkIPAM(dataDir, prefix string) map[string]any {
	return map[string]any{"type": "host-local", "dataDir": dataDir, "ranges": [][]map[string]string{{{
		"subnet": prefix + ".0/24", "rangeStart": prefix + ".10", "rangeEnd": prefix + ".50", "gateway": prefix + ".1",
	}}}, "routes": []map[string]string{{"dst": "10.200.0.0/16"}}}
}

// MergeConf is conf as JSON, with each of keys merged over it in turn
// (conf itself changes); a nil value drops the key.
func MergeConf(conf map[string]any, keys ...map[string]any) []byte {
	ginkgo.GinkgoHelper()
	for _, ks := range keys {
		for k, v := range ks {
			if v == nil {
				delete(conf, k)
			} else {
				conf[k] = v
			}
		}
	}
	b, err := json.Marshal(conf)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return b
}

// Call is the invocation of cmd for container id with ifname eth0 in n
// (nil: CNI_NETNS empty).
func (e *LinkEnv) Call(cmd, id string, n *ns.NetNS, stdin []byte) Call {
	c := Call{Command: cmd, ContainerID: id, IfName: "eth0", Stdin: stdin}
	if n != nil {
		c.Netns = n.Path()
	}
	return c
}

// Run runs the plugin in HostNS; the CNI error it reported is in Err.
func (e *LinkEnv) Run(c Call) Output {
	ginkgo.GinkgoHelper()
	return RunIn(e.HostNS, e.p.Plugin, c)
}

// MustRun is Run that fails the spec when the plugin reports an error.
func (e *LinkEnv) MustRun(c Call) Output {
	ginkgo.GinkgoHelper()
	return MustRunIn(e.HostNS, e.p.Plugin, c)
}

// Add runs a successful ADD of container id in n and returns what it
// printed and that result in the current version.
func (e *LinkEnv) Add(ver, id string, n *ns.NetNS, stdin []byte) ([]byte, *current.Result) {
	ginkgo.GinkgoHelper()
	out := e.MustRun(e.Call("ADD", id, n, stdin))
	return out.Stdout, ParseResult(ver, out.Stdout)
}

// Snapshot is what an attachment could leave in HostNS, ContNS and DataDir.
func (e *LinkEnv) Snapshot() Snapshot {
	ginkgo.GinkgoHelper()
	return TakeSnapshot(e.HostNS, e.ContNS, e.DataDir)
}

// Link is eth0 in n.
func (e *LinkEnv) Link(n *ns.NetNS) netlink.Link {
	ginkgo.GinkgoHelper()
	l, err := Handle(n).LinkByName("eth0")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return l
}

// HostLinks are the links the stand-in host has, with or without an
// attachment: lo and the master.
func (e *LinkEnv) HostLinks() []string {
	if e.p.Master == "" {
		return []string{"lo"}
	}
	return []string{"lo", e.p.Master}
}

// ExpectAttachment checks what every link plugin's ADD in ContNS gives: a
// result of version ver with IPs addresses, all on the one interface
// (eth0, in ContNS, with its MAC) from 0.3.0 on; eth0 of Kind holding those
// addresses; the host's links unchanged; and traffic: the peer answers
// (without a master: the container's own addresses do).
func (e *LinkEnv) ExpectAttachment(ver string, res *current.Result) {
	ginkgo.GinkgoHelper()
	gomega.Expect(res.IPs).To(gomega.HaveLen(e.p.IPs))
	l := e.Link(e.ContNS)
	if AtLeast(ver, "0.3.0") {
		gomega.Expect(res.Interfaces).To(gomega.HaveLen(1))
		gomega.Expect(res.Interfaces[0].Name).To(gomega.Equal("eth0"))
		gomega.Expect(res.Interfaces[0].Sandbox).To(gomega.Equal(e.ContNS.Path()))
		gomega.Expect(res.Interfaces[0].Mac).To(gomega.Equal(l.Attrs().HardwareAddr.String()))
		for _, ipc := range res.IPs {
			gomega.Expect(*ipc.Interface).To(gomega.Equal(0))
		}
	}
	gomega.Expect(l.Type()).To(gomega.Equal(e.p.Kind))
	gomega.Expect(LinkNames(e.HostNS)).To(gomega.ConsistOf(e.HostLinks()))
	var addrs []string
	for _, ipc := range res.IPs {
		addrs = append(addrs, ipc.Address.String())
	}
	gomega.Expect(Addrs(e.ContNS, "eth0")).To(gomega.ConsistOf(addrs))
	if e.p.PeerIP != "" {
		gomega.Expect(Ping(e.ContNS, e.p.PeerIP)).To(gomega.Succeed())
		return
	}
	for _, ipc := range res.IPs {
		gomega.Expect(Ping(e.ContNS, ipc.Address.IP.String())).To(gomega.Succeed())
	}
}

// VersionSpecs registers the shared specs of spec version ver: ADD, CHECK,
// DEL, DEL; and DEL without a netns and with the netns gone.
func (e *LinkEnv) VersionSpecs(ver string) {
	ginkgo.It("survives ADD, CHECK, DEL, DEL and leaves nothing behind", func() {
		stdin := e.Conf(ver)
		before := e.Snapshot()
		out, _ := e.Add(ver, "c1", e.ContNS, stdin)
		if AtLeast(ver, "0.4.0") {
			e.MustRun(e.Call("CHECK", "c1", e.ContNS, WithPrev(stdin, out)))
		}
		e.MustRun(e.Call("DEL", "c1", e.ContNS, stdin))
		gomega.Expect(e.Snapshot()).To(gomega.Equal(before))
		e.MustRun(e.Call("DEL", "c1", e.ContNS, stdin))
		gomega.Expect(e.Snapshot()).To(gomega.Equal(before))
	})

	what := "address"
	if e.p.IPs > 1 {
		what = "addresses"
	}
	ginkgo.It("releases the "+what+" on DEL without a netns and with the netns gone", func() {
		stdin, second := e.Conf(ver), e.Conf(ver, e.p.SecondKeys)
		gone, remove, err := CreateNS()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		ginkgo.DeferCleanup(remove)
		e.Add(ver, "c1", gone, stdin)
		e.Add(ver, "c2", e.ContNS, second)
		gomega.Expect(Reservations(e.DataDir)).To(gomega.HaveLen(2 * e.p.IPs))
		path := gone.Path()
		gomega.Expect(gone.Close()).To(gomega.Succeed())
		gomega.Expect(remove()).To(gomega.Succeed())
		e.MustRun(Call{Command: "DEL", ContainerID: "c1", Netns: path, IfName: "eth0", Stdin: stdin})
		e.MustRun(e.Call("DEL", "c2", nil, second))
		// And again for c1, as a runtime that lost track of the netns would.
		e.MustRun(e.Call("DEL", "c1", nil, stdin))
		gomega.Expect(Reservations(e.DataDir)).To(gomega.BeEmpty())
		gomega.Expect(LinkNames(e.HostNS)).To(gomega.ConsistOf(e.HostLinks()))
	})
}

// Specs registers the shared specs outside the version table: the master's
// mtu, a master in the container, layer 2 only, a CNI_IFNAME that is taken, a failure after each ADD
// step, and bad input.
func (e *LinkEnv) Specs() {
	p := e.p
	if p.EditedKeys != nil {
		ginkgo.It("DEL removes the link and releases IPAM with a config that no longer validates", func() {
			before := e.Snapshot()
			e.Add("1.1.0", "c1", e.ContNS, e.Conf("1.1.0"))
			edited := e.Conf("1.1.0", p.EditedKeys)
			out := e.Run(e.Call("ADD", "c2", e.ContNS, edited))
			gomega.Expect(out.Err).NotTo(gomega.BeNil())
			gomega.Expect(out.Err.Code).To(gomega.BeEquivalentTo(types.ErrInvalidNetworkConfig), "ADD still refuses it")
			e.MustRun(e.Call("DEL", "c1", e.ContNS, edited))
			gomega.Expect(e.Snapshot()).To(gomega.Equal(before))
			e.MustRun(e.Call("DEL", "c1", e.ContNS, edited))
		})
	}
	if p.Master != "" {
		ginkgo.It("refuses an mtu above the master's (code 7, both numbers) and creates nothing", func() {
			before := e.Snapshot()
			out := e.Run(e.Call("ADD", "c1", e.ContNS, e.Conf("1.1.0", map[string]any{"mtu": 9000})))
			gomega.Expect(out.Err).NotTo(gomega.BeNil())
			gomega.Expect(out.Err.Code).To(gomega.BeEquivalentTo(types.ErrInvalidNetworkConfig))
			gomega.Expect(out.Err.Msg).To(gomega.And(gomega.ContainSubstring("9000"), gomega.ContainSubstring("1500"), gomega.ContainSubstring(p.Master)))
			gomega.Expect(e.Snapshot()).To(gomega.Equal(before))
			// An mtu below it is applied.
			e.Add("1.1.0", "c1", e.ContNS, e.Conf("1.1.0", map[string]any{"mtu": 1400}))
			gomega.Expect(e.Link(e.ContNS).Attrs().MTU).To(gomega.Equal(1400))
		})
	}

	if p.Master != "" {
		ginkgo.It("announces each IPv4 address with a gratuitous ARP that reaches the master's peer", func() {
			l, err := ListenARP(e.PeerNS, "peer0")
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			defer l.Close()
			_, res := e.Add("1.1.0", "c1", e.ContNS, e.Conf("1.1.0"))
			mac := e.Link(e.ContNS).Attrs().HardwareAddr
			v4 := 0
			for _, ipc := range res.IPs {
				if ipc.Address.IP.To4() != nil {
					v4++
					gomega.Expect(l.Announced(ipc.Address.IP.String(), 5*time.Second)).To(gomega.Equal(mac), "announcement of %s", ipc.Address.IP)
				}
			}
			gomega.Expect(v4).To(gomega.BeNumerically(">", 0))
		})

		ginkgo.It("linkInContainer: the master lives in the container; CHECK and DEL work there", func() {
			e.Wire(e.ContNS, "cmaster", NewNS(), "opeer")
			stdin := e.Conf("1.1.0", map[string]any{"master": "cmaster", "linkInContainer": true})
			out, _ := e.Add("1.1.0", "c1", e.ContNS, stdin)
			gomega.Expect(LinkNames(e.ContNS)).To(gomega.ConsistOf("lo", "cmaster", "eth0"))
			gomega.Expect(LinkNames(e.HostNS)).To(gomega.ConsistOf(e.HostLinks()))
			gomega.Expect(Ping(e.ContNS, p.PeerIP)).To(gomega.Succeed())
			e.MustRun(e.Call("CHECK", "c1", e.ContNS, WithPrev(stdin, out)))
			e.MustRun(e.Call("DEL", "c1", e.ContNS, stdin))
			gomega.Expect(LinkNames(e.ContNS)).To(gomega.ConsistOf("lo", "cmaster"))
			gomega.Expect(Reservations(e.DataDir)).To(gomega.BeEmpty())
		})
	}

	if p.Layer2 {
		ginkgo.It("is layer 2 only with ipam {} or none", func() {
			// Both at once on the master: the second with SecondKeys.
			for i, keys := range []map[string]any{{"ipam": map[string]any{}}, {"ipam": nil}} {
				n := NewNS()
				second := map[string]any(nil)
				if i == 1 {
					second = p.SecondKeys
				}
				_, res := e.Add("1.1.0", "c"+string(rune('0'+i)), n, e.Conf("1.1.0", keys, second))
				gomega.Expect(res.IPs).To(gomega.BeEmpty())
				gomega.Expect(Addrs(n, "eth0")).To(gomega.BeEmpty())
				gomega.Expect(e.Link(n).Attrs().Flags & (1 << 0)).NotTo(gomega.BeZero()) // IFF_UP
			}
		})
	}

	ginkgo.It("refuses a CNI_IFNAME the container already has and leaves nothing", func() {
		gomega.Expect(Handle(e.ContNS).LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}})).To(gomega.Succeed())
		before := e.Snapshot()
		out := e.Run(e.Call("ADD", "c1", e.ContNS, e.Conf("1.1.0")))
		gomega.Expect(out.Err).NotTo(gomega.BeNil())
		gomega.Expect(out.Err.Msg).To(gomega.ContainSubstring(`"eth0"`))
		gomega.Expect(e.Snapshot()).To(gomega.Equal(before))
		// And DEL leaves the other plugin's eth0 alone.
		e.MustRun(e.Call("DEL", "c1", e.ContNS, e.Conf("1.1.0")))
		gomega.Expect(LinkNames(e.ContNS)).To(gomega.ContainElement("eth0"))
	})

	ginkgo.Describe("a failure injected after each ADD step leaves nothing behind", func() {
		for _, step := range p.AddSteps {
			ginkgo.It("error after "+step, func() {
				stdin := e.Conf("1.1.0")
				before := e.Snapshot()
				out := RunIn(e.HostNS, p.WithStepHook(FailAfter(step, nil)), e.Call("ADD", "c1", e.ContNS, stdin))
				gomega.Expect(out.Err).NotTo(gomega.BeNil())
				gomega.Expect(out.Err.Msg).To(gomega.ContainSubstring("injected failure"))
				gomega.Expect(e.Snapshot()).To(gomega.Equal(before))
				// Nothing is held (a VLAN ID, an address): the same ADD succeeds.
				e.Add("1.1.0", "c1", e.ContNS, stdin)
			})
			ginkgo.It("panic after "+step, func() {
				before := e.Snapshot()
				out := RunIn(e.HostNS, p.WithStepHook(PanicAfter(step)), e.Call("ADD", "c1", e.ContNS, e.Conf("1.1.0")))
				gomega.Expect(out.Err).NotTo(gomega.BeNil())
				gomega.Expect(out.Err.Code).To(gomega.BeEquivalentTo(types.ErrInternal))
				gomega.Expect(e.Snapshot()).To(gomega.Equal(before))
			})
		}
	})

	rows := []BadInput{
		{Name: "not JSON (6)", Stdin: []byte(`{"name": `), Code: 6, Msg: "unmarshal"},
		{Name: "no CNI_NETNS (4)", NoNetns: true, Code: 4, Msg: "CNI_NETNS"},
		{Name: "unsupported version (1)", Ver: "9.9.9", Code: 1, Msg: "9.9.9"},
	}
	if p.Master != "" {
		rows = append(rows, BadInput{Name: "missing master (7)", Keys: map[string]any{"master": "nope0"}, Code: 7, Msg: `"nope0"`})
	}
	rows = append(rows, p.BadInput...)
	entries := make([]ginkgo.TableEntry, 0, len(rows))
	for _, r := range rows {
		entries = append(entries, ginkgo.Entry(r.Name, r))
	}
	ginkgo.DescribeTable("bad input is refused with its code and creates nothing", func(r BadInput) {
		before := e.Snapshot()
		stdin := r.Stdin
		if stdin == nil {
			ver := r.Ver
			if ver == "" {
				ver = "1.1.0"
			}
			stdin = e.Conf(ver, r.Keys)
		}
		c := e.Call("ADD", "c1", e.ContNS, stdin)
		c.Args = r.Args
		if r.NoNetns {
			c.Netns = ""
		}
		out := e.Run(c)
		gomega.Expect(out.Err).NotTo(gomega.BeNil())
		gomega.Expect(out.Err.Code).To(gomega.BeEquivalentTo(r.Code))
		gomega.Expect(out.Err.Msg + " " + out.Err.Details).To(gomega.ContainSubstring(r.Msg))
		gomega.Expect(e.Snapshot()).To(gomega.Equal(before))
	}, entries)
}
