package static_test

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	types020 "github.com/containernetworking/cni/pkg/types/020"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/ipam/static"
)

// static touches no kernel state and never opens CNI_NETNS, so these tests
// run it in-process without namespaces; skel only needs the path to be set.
const fakeNetns = "/run/netns/static-test-never-opened"

// dualStack is a config with one address per family, which every spec
// version (0.1.0 and 0.2.0 included) can report.
func dualStack(ver string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion": %q, "name": "static-net", "type": "macvlan",
		"ipam": {"type": "static",
			"addresses": [
				{"address": "10.10.0.5/24", "gateway": "10.10.0.1"},
				{"address": "fd00:10::5/64", "gateway": "fd00:10::1"}],
			"routes": [{"dst": "0.0.0.0/0"}, {"dst": "fd00:99::/64", "gw": "fd00:10::99"}],
			"dns": {"nameservers": ["10.10.0.53"], "domain": "example.test", "search": ["example.test"]}}}`, ver))
}

func call(cmd string, stdin []byte) testutil.Call {
	return testutil.Call{Command: cmd, ContainerID: "c1", Netns: fakeNetns, IfName: "eth0", Stdin: stdin}
}

func run(c testutil.Call) testutil.Output {
	GinkgoHelper()
	out, err := testutil.Run(static.Plugin, c)
	Expect(err).NotTo(HaveOccurred())
	return out
}

func add(c testutil.Call) *current.Result {
	GinkgoHelper()
	out := run(c)
	Expect(out.Err).To(BeNil())
	res, err := current.NewResult(out.Stdout)
	Expect(err).NotTo(HaveOccurred())
	return res.(*current.Result)
}

func ipsOf(res *current.Result) []string {
	out := []string{}
	for _, ipc := range res.IPs {
		s := ipc.Address.String()
		if ipc.Gateway != nil {
			s += ">" + ipc.Gateway.String()
		}
		out = append(out, s)
	}
	return out
}

var _ = Describe("static", func() {
	DescribeTableSubtree("every spec version", func(ver string) {
		It("hands out the configured addresses, routes and DNS in the requested version", func() {
			out := run(call("ADD", dualStack(ver)))
			Expect(out.Err).To(BeNil())
			res, err := version.NewResult(ver, out.Stdout)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Version()).To(Equal(ver))

			if !testutil.AtLeast(ver, "0.3.0") {
				r := res.(*types020.Result)
				Expect(r.IP4).NotTo(BeNil())
				Expect(r.IP4.IP.String()).To(Equal("10.10.0.5/24"))
				Expect(r.IP4.Gateway.String()).To(Equal("10.10.0.1"))
				Expect(r.IP4.Routes).To(HaveLen(1))
				Expect(r.IP4.Routes[0].Dst.String()).To(Equal("0.0.0.0/0"))
				Expect(r.IP6).NotTo(BeNil())
				Expect(r.IP6.IP.String()).To(Equal("fd00:10::5/64"))
				Expect(r.IP6.Gateway.String()).To(Equal("fd00:10::1"))
				Expect(r.IP6.Routes).To(HaveLen(1))
				Expect(r.IP6.Routes[0].GW.String()).To(Equal("fd00:10::99"))
				Expect(r.DNS.Nameservers).To(Equal([]string{"10.10.0.53"}))
				return
			}
			cur, err := current.NewResultFromResult(res)
			Expect(err).NotTo(HaveOccurred())
			Expect(ipsOf(cur)).To(Equal([]string{"10.10.0.5/24>10.10.0.1", "fd00:10::5/64>fd00:10::1"}))
			Expect(cur.Interfaces).To(BeEmpty(), "an IPAM result names no interface")
			for _, ipc := range cur.IPs {
				Expect(ipc.Interface).To(BeNil())
			}
			Expect(cur.Routes).To(HaveLen(2))
			Expect(cur.Routes[1].Dst.String()).To(Equal("fd00:99::/64"))
			Expect(cur.Routes[1].GW.String()).To(Equal("fd00:10::99"))
			Expect(cur.DNS).To(Equal(types.DNS{Nameservers: []string{"10.10.0.53"}, Domain: "example.test", Search: []string{"example.test"}}))
		})

		It("survives ADD, CHECK, DEL, DEL", func() {
			out := run(call("ADD", dualStack(ver)))
			Expect(out.Err).To(BeNil())
			if testutil.AtLeast(ver, "0.4.0") {
				Expect(run(call("CHECK", testutil.WithPrev(dualStack(ver), out.Stdout))).Err).To(BeNil())
			}
			Expect(run(call("DEL", dualStack(ver))).Err).To(BeNil())
			Expect(run(call("DEL", dualStack(ver))).Err).To(BeNil())
		})

		It("succeeds on DEL without a netns", func() {
			c := call("DEL", dualStack(ver))
			c.Netns = ""
			Expect(run(c).Err).To(BeNil())
		})

		It("takes per-call addresses from CNI_ARGS IP and GATEWAY", func() {
			stdin := []byte(fmt.Sprintf(`{"cniVersion": %q, "name": "n", "ipam": {"type": "static"}}`, ver))
			c := call("ADD", stdin)
			c.Args = "IgnoreUnknown=1;K8S_POD_NAME=p;IP=10.7.0.7/24,fd00:7::7/64;GATEWAY=10.7.0.1"
			out := run(c)
			Expect(out.Err).To(BeNil())
			Expect(ipsOf(testutil.ParseResult(ver, out.Stdout))).To(Equal([]string{"10.7.0.7/24>10.7.0.1", "fd00:7::7/64"}))
		})
	}, testutil.VersionEntries())

	// Upstream's static drops a GATEWAY in the subnet of no address; ADD
	// succeeds without it, and says so on stderr.
	It("drops a CNI_ARGS GATEWAY in the subnet of no address, with a warning", func() {
		c := call("ADD", []byte(`{"cniVersion": "1.1.0", "name": "n", "ipam": {"type": "static"}}`))
		c.Args = "IP=10.7.0.7/24;GATEWAY=10.7.0.1,fd00::1,10.9.0.1"
		out, err := testutil.Exec("static", c) // the binary: its stderr
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Err).To(BeNil())
		Expect(ipsOf(testutil.ParseResult("1.1.0", out.Stdout))).To(Equal([]string{"10.7.0.7/24>10.7.0.1"}))
		Expect(string(out.Stderr)).To(And(ContainSubstring("GATEWAY[1] fd00::1"), ContainSubstring("GATEWAY[2] 10.9.0.1")))
	})

	It("reports several addresses per family from 0.3.0 on", func() {
		stdin := []byte(`{"cniVersion": "0.3.1", "name": "n", "ipam": {"type": "static", "addresses": [
			{"address": "10.1.0.2/24"}, {"address": "10.2.0.2/24"}, {"address": "fd00:1::2/64"}, {"address": "fd00:2::2/64"}]}}`)
		out := run(call("ADD", stdin))
		Expect(out.Err).To(BeNil())
		var raw struct {
			IPs []map[string]any `json:"ips"`
		}
		Expect(json.Unmarshal(out.Stdout, &raw)).To(Succeed())
		Expect(raw.IPs).To(HaveLen(4))
		Expect(raw.IPs[0]).To(HaveKeyWithValue("version", "4"), "0.3.x results carry a per-IP version")
		Expect(raw.IPs[2]).To(HaveKeyWithValue("version", "6"))
	})

	Describe("per-call address sources, first one set wins", func() {
		conf := func(extra string) []byte {
			return []byte(`{"cniVersion": "1.1.0", "name": "n",
				"ipam": {"type": "static", "addresses": [{"address": "10.1.0.2/24", "gateway": "10.1.0.1"}]}` + extra + `}`)
		}
		const cniArgs = "IP=10.5.0.5/24;GATEWAY=10.5.0.1"

		It("uses runtimeConfig.ips over args.cni.ips, CNI_ARGS and ipam.addresses", func() {
			c := call("ADD", conf(`, "runtimeConfig": {"ips": ["10.3.0.3/24"]}, "args": {"cni": {"ips": ["10.4.0.4/24"]}}`))
			c.Args = cniArgs
			Expect(ipsOf(add(c))).To(Equal([]string{"10.3.0.3/24"}))
		})
		It("uses args.cni.ips over CNI_ARGS and ipam.addresses", func() {
			c := call("ADD", conf(`, "args": {"cni": {"ips": ["10.4.0.4/24"]}}`))
			c.Args = cniArgs
			Expect(ipsOf(add(c))).To(Equal([]string{"10.4.0.4/24"}))
		})
		It("adds CNI_ARGS IP to ipam.addresses, as upstream static does", func() {
			c := call("ADD", conf(""))
			c.Args = cniArgs
			Expect(ipsOf(add(c))).To(Equal([]string{"10.1.0.2/24>10.1.0.1", "10.5.0.5/24>10.5.0.1"}))
		})
		It("uses ipam.addresses when nothing is passed per call", func() {
			Expect(ipsOf(add(call("ADD", conf(""))))).To(Equal([]string{"10.1.0.2/24>10.1.0.1"}))
		})
	})

	It("returns routes and DNS only when no address is given (as upstream)", func() {
		res := add(call("ADD", []byte(`{"cniVersion": "1.0.0", "name": "n",
			"ipam": {"type": "static", "routes": [{"dst": "10.0.0.0/8"}]}}`)))
		Expect(res.IPs).To(BeEmpty())
		Expect(res.Routes).To(HaveLen(1))
	})

	It("refuses ADD without an address for a 0.2.0 result, which needs one", func() {
		out := run(call("ADD", []byte(`{"cniVersion": "0.2.0", "name": "n", "ipam": {"type": "static"}}`)))
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring("ipam.addresses: none given"))
	})

	It("fails CHECK when prevResult lacks a configured address", func() {
		prev := []byte(`{"cniVersion": "1.1.0", "ips": [{"address": "10.10.0.5/24"}, {"address": "fd00:10::5/48"}]}`)
		out := run(call("CHECK", testutil.WithPrev(dualStack("1.1.0"), prev)))
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(ContainSubstring("prevResult lacks fd00:10::5/64 given by ipam.addresses[1]"))
	})

	It("passes CHECK without a prevResult when the config is valid", func() {
		Expect(run(call("CHECK", dualStack("1.1.0"))).Err).To(BeNil())
	})

	It("succeeds on GC and STATUS", func() {
		Expect(run(call("STATUS", dualStack("1.1.0"))).Err).To(BeNil())
		gc := testutil.WithPrev(dualStack("1.1.0"), []byte(`{"cniVersion": "1.1.0"}`))
		var m map[string]any
		Expect(json.Unmarshal(gc, &m)).To(Succeed())
		delete(m, "prevResult")
		m["cni.dev/valid-attachments"] = []any{map[string]any{"containerID": "c1", "ifname": "eth0"}}
		gc, _ = json.Marshal(m)
		Expect(run(call("GC", gc)).Err).To(BeNil())
	})

	Describe("bad input", func() {
		It("rejects malformed JSON with code 6", func() {
			out := run(call("ADD", []byte(`{"cniVersion": "1.1.0", "name": `)))
			testutil.ExpectCode(out, types.ErrDecodingFailure)
			Expect(out.Stdout).NotTo(ContainSubstring(`"ips"`))
		})
		It("rejects a missing CNI_CONTAINERID with code 4", func() {
			c := call("ADD", dualStack("1.1.0"))
			c.ContainerID = ""
			out := run(c)
			testutil.ExpectCode(out, types.ErrInvalidEnvironmentVariables)
			Expect(out.Err.Msg + out.Err.Details).To(ContainSubstring("CNI_CONTAINERID"))
		})
		It("rejects an unsupported cniVersion with code 1", func() {
			out := run(call("ADD", dualStack("9.9.9")))
			testutil.ExpectCode(out, types.ErrIncompatibleCNIVersion)
		})
		It("rejects an address without prefix with code 7 naming key and value", func() {
			out := run(call("ADD", []byte(`{"cniVersion": "1.1.0", "name": "n",
				"ipam": {"type": "static", "addresses": [{"address": "10.0.0.2/24"}, {"address": "10.0.0.1"}]}}`)))
			testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
			Expect(out.Err.Msg).To(Equal(`ipam.addresses[1].address: "10.0.0.1" has no prefix length (write it as 10.0.0.1/<prefix>)`))
		})
		It("rejects a bad CNI_ARGS IP on ADD and CHECK with code 7", func() {
			for _, cmd := range []string{"ADD", "CHECK"} {
				c := call(cmd, dualStack("1.1.0"))
				c.Args = "IP=10.9.9.9"
				out := run(c)
				Expect(out.Err).NotTo(BeNil(), cmd)
				Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig), cmd)
				Expect(out.Err.Msg).To(ContainSubstring(`CNI_ARGS IP[0]: "10.9.9.9" has no prefix length`), cmd)
			}
		})
		It("rejects malformed JSON with code 6 on DEL, GC and STATUS too", func() {
			for _, cmd := range []string{"DEL", "GC", "STATUS"} {
				out := run(call(cmd, []byte(`{"cniVersion": "1.1.0", "name": `)))
				Expect(out.Err).NotTo(BeNil(), cmd)
				Expect(out.Err.Code).To(BeEquivalentTo(types.ErrDecodingFailure), cmd)
			}
		})
	})

	// static keeps no state, so nothing in a call can stop DEL or GC from
	// doing their (empty) job: refusing would only block pod teardown.
	// STATUS answers "can ADD work": a bad value in the network's own config
	// fails it (code 7), a bad per-call input does not.
	DescribeTable("DEL and GC succeed on input ADD and CHECK refuse; STATUS fails only on the network's own config",
		func(ipam, top, cniArgs, msg string, ownConfig bool) {
			stdin := []byte(`{"cniVersion": "1.1.0", "name": "n", "ipam": {"type": "static"` + ipam + `}` + top + `}`)
			for _, cmd := range []string{"ADD", "CHECK"} {
				c := call(cmd, stdin)
				c.Args = cniArgs
				out := run(c)
				Expect(out.Err).NotTo(BeNil(), cmd)
				Expect(out.Err.Msg).To(ContainSubstring(msg), cmd)
			}
			for _, cmd := range []string{"DEL", "GC"} {
				c := call(cmd, stdin)
				c.Args = cniArgs
				Expect(run(c).Err).To(BeNil(), cmd)
			}
			status := run(call("STATUS", stdin))
			if ownConfig {
				testutil.ExpectCode(status, types.ErrInvalidNetworkConfig)
				Expect(status.Err.Msg).To(ContainSubstring(msg))
			} else {
				Expect(status.Err).To(BeNil())
			}
		},
		Entry("an unknown CNI_ARGS key without IgnoreUnknown", "", "", "K8S_POD_NAME=p", `CNI_ARGS: unknown key "K8S_POD_NAME"`, false),
		Entry("a malformed CNI_ARGS pair", "", "", "IP", `CNI_ARGS: "IP" is not a KEY=VALUE pair`, false),
		Entry("a CNI_ARGS IP without prefix", "", "", "IP=10.9.9.9", `CNI_ARGS IP[0]: "10.9.9.9" has no prefix length`, false),
		Entry("a route dst with host bits", `, "routes": [{"dst": "10.0.0.5/24"}]`, "", "", `ipam.routes[0].dst: "10.0.0.5/24" has host bits set`, true),
		Entry("an address without prefix", `, "addresses": [{"address": "10.0.0.1"}]`, "", "", `ipam.addresses[0].address: "10.0.0.1" has no prefix length`, true),
		Entry("a bad runtimeConfig.ips", "", `, "runtimeConfig": {"ips": ["10.3.0.3"]}`, "", `runtimeConfig.ips[0]: "10.3.0.3" has no prefix length`, false),
		Entry("a runtimeConfig.ips of the wrong type", "", `, "runtimeConfig": {"ips": "10.3.0.3/24"}`, "", `runtimeConfig.ips: "10.3.0.3/24" is not a list`, false),
	)

	It("works as the built binary", func() {
		out, err := testutil.Exec("static", call("ADD", dualStack("1.0.0")))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Err).To(BeNil(), "stderr: %s", out.Stderr)
		res, err := current.NewResult(out.Stdout)
		Expect(err).NotTo(HaveOccurred())
		Expect(ipsOf(res.(*current.Result))).To(Equal([]string{"10.10.0.5/24>10.10.0.1", "fd00:10::5/64>fd00:10::1"}))
	})
})
