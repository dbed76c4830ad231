package hostlocal

import (
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
)

func versionEntries() []TableEntry {
	var out []TableEntry
	for _, v := range testutil.CNIVersions {
		out = append(out, Entry("cniVersion "+v, v))
	}
	return out
}

var _ = DescribeTableSubtree("every spec version", func(ver string) {
	var dataDir string
	var stdin []byte

	BeforeEach(func() {
		dataDir = GinkgoT().TempDir()
		stdin = conf(ver, dataDir, map[string]any{
			"ranges": []any{
				[]any{map[string]any{"subnet": "10.1.0.0/24"}},
				[]any{map[string]any{"subnet": "fd00:1::/64"}},
			},
			"routes": []any{
				map[string]any{"dst": "0.0.0.0/0"},
				map[string]any{"dst": "fd00:9::/64", "gw": "fd00:1::9"},
			},
		}, nil)
	})

	It("ADD answers in the requested version; CHECK, DEL, DEL follow", func() {
		out := run("ADD", "ctr1", "eth0", stdin, "")
		Expect(out.Err).To(BeNil())
		cur := testutil.ParseResult(ver, out.Stdout)
		Expect(addrsOf(cur)).To(Equal([]string{"10.1.0.2/24", "fd00:1::2/64"}))
		Expect(cur.IPs[0].Gateway.String()).To(Equal("10.1.0.1"))
		Expect(cur.IPs[1].Gateway.String()).To(Equal("fd00:1::1"))
		for _, ip := range cur.IPs {
			Expect(ip.Interface).To(BeNil(), "the interface plugin sets the index")
		}
		Expect(cur.Routes).To(HaveLen(2))
		Expect(cur.Routes[0].Dst.String()).To(Equal("0.0.0.0/0"))
		Expect(cur.Routes[0].GW).To(BeNil())
		Expect(cur.Routes[1].GW.String()).To(Equal("fd00:1::9"))

		Expect(reservations(dataDir)).To(Equal(map[string]string{
			"10.1.0.2":  "ctr1\r\neth0",
			"fd00:1::2": "ctr1\r\neth0",
		}))

		if testutil.AtLeast(ver, "0.4.0") {
			checkIn := testutil.WithPrev(stdin, out.Stdout)
			Expect(run("CHECK", "ctr1", "eth0", checkIn, "").Err).To(BeNil())
			// Another container does not hold these addresses.
			Expect(run("CHECK", "ctr2", "eth0", checkIn, "").Err).NotTo(BeNil())
		} else {
			Expect(run("CHECK", "ctr1", "eth0", stdin, "").Err).NotTo(BeNil(), "skel refuses CHECK before 0.4.0")
		}

		Expect(run("DEL", "ctr1", "eth0", stdin, "").Err).To(BeNil())
		Expect(reservations(dataDir)).To(BeEmpty())
		Expect(run("DEL", "ctr1", "eth0", stdin, "").Err).To(BeNil())
	})

	It("ADD, DEL, ADD ends in the same state, round-robin moving on", func() {
		Expect(run("ADD", "ctr1", "eth0", stdin, "").Err).To(BeNil())
		Expect(run("DEL", "ctr1", "eth0", stdin, "").Err).To(BeNil())
		out := run("ADD", "ctr1", "eth0", stdin, "")
		Expect(out.Err).To(BeNil())
		Expect(reservations(dataDir)).To(Equal(map[string]string{
			"10.1.0.3":  "ctr1\r\neth0",
			"fd00:1::3": "ctr1\r\neth0",
		}))
	})

	It("DEL of something never added succeeds and creates nothing", func() {
		Expect(run("DEL", "nobody", "eth0", stdin, "").Err).To(BeNil())
		Expect(filepath.Join(dataDir, testNet)).NotTo(BeADirectory())
	})

	It("GC and STATUS exist from 1.1.0 on", func() {
		gcIn := conf(ver, dataDir, ranges("10.1.0.0/24", "fd00:1::/64"), map[string]any{"cni.dev/valid-attachments": nil})
		gcOut := run("GC", "", "", gcIn, "")
		statusOut := run("STATUS", "", "", stdin, "")
		if testutil.AtLeast(ver, "1.1.0") {
			Expect(gcOut.Err).To(BeNil())
			Expect(statusOut.Err).To(BeNil())
		} else {
			Expect(gcOut.Err).NotTo(BeNil())
			Expect(statusOut.Err).NotTo(BeNil())
		}
	})
}, versionEntries())

var _ = It("DEL releases the addresses with a config whose ranges no longer validate", func() {
	// A config edited between ADD and DEL must not keep the addresses
	// reserved for good (issue 22): DEL needs only name and dataDir.
	dataDir := GinkgoT().TempDir()
	Expect(run("ADD", "ctr1", "eth0", conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil), "").Err).To(BeNil())
	Expect(reservations(dataDir)).To(HaveLen(1))
	edited := conf("1.1.0", dataDir, ranges("10.1.0.0/33", map[string]any{"subnet": "10.2.0.0/24", "rangeStart": "10.9.0.1"}), nil)
	out := run("ADD", "ctr2", "eth0", edited, "")
	testutil.ExpectCode(out, types.ErrInvalidNetworkConfig, "ADD still refuses it")
	Expect(run("DEL", "ctr1", "eth0", edited, "").Err).To(BeNil())
	Expect(reservations(dataDir)).To(BeEmpty())
	Expect(run("DEL", "ctr1", "eth0", edited, "").Err).To(BeNil())
})

var _ = It("refuses, before reserving, a CNI_NETNS that is the plugin's own namespace", func() {
	// skel checks it only after ADD: the address was reserved, the result
	// printed, then the error (issue 22).
	dataDir := GinkgoT().TempDir()
	stdin := conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil)
	own := testutil.NewNS()
	for _, cmd := range []string{"ADD", "DEL"} {
		out := testutil.RunIn(own, Plugin, testutil.Call{Command: cmd, ContainerID: "ctr1", IfName: "eth0",
			Netns: own.Path(), Stdin: stdin, Path: "/nonexistent"})
		Expect(out.Err).NotTo(BeNil(), cmd)
		Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetNS), cmd)
		Expect(out.Err.Msg).To(ContainSubstring("CNI_NETNS " + own.Path() + " is the plugin's own network namespace"))
		var one map[string]any
		Expect(json.Unmarshal(out.Stdout, &one)).To(Succeed(), "one JSON document: %s", out.Stdout)
		Expect(reservations(dataDir)).To(BeEmpty(), cmd)
	}
	// CNI_NETNS_OVERRIDE: the runtime means the plugin's namespace.
	out := testutil.RunIn(own, Plugin, testutil.Call{Command: "ADD", ContainerID: "ctr1", IfName: "eth0",
		Netns: own.Path(), Stdin: stdin, Path: "/nonexistent", Env: map[string]string{"CNI_NETNS_OVERRIDE": "1"}})
	Expect(out.Err).To(BeNil())
	Expect(reservations(dataDir)).To(HaveLen(1))
})

var _ = Describe("bad input", func() {
	var dataDir string
	BeforeEach(func() { dataDir = GinkgoT().TempDir() })

	expectNothingLeft := func() {
		GinkgoHelper()
		entries, err := os.ReadDir(dataDir)
		Expect(err).NotTo(HaveOccurred())
		Expect(entries).To(BeEmpty())
	}

	It("refuses malformed JSON with code 6", func() {
		out := run("ADD", "ctr1", "eth0", []byte(`{"cniVersion":"1.1.0","name":`), "")
		testutil.ExpectCode(out, types.ErrDecodingFailure)
		expectNothingLeft()
	})

	It("refuses a missing CNI_CONTAINERID with code 4", func() {
		out := run("ADD", "", "eth0", conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil), "")
		testutil.ExpectCode(out, types.ErrInvalidEnvironmentVariables)
		expectNothingLeft()
	})

	It("refuses an unsupported cniVersion with code 1", func() {
		out := run("ADD", "ctr1", "eth0", conf("9.9.9", dataDir, ranges("10.1.0.0/24"), nil), "")
		testutil.ExpectCode(out, types.ErrIncompatibleCNIVersion)
		expectNothingLeft()
	})

	DescribeTable("refuses invalid values with code 7 naming the key; DEL releases by name and dataDir",
		func(ipam map[string]any, top map[string]any, msg string) {
			for _, cmd := range []string{"ADD", "CHECK", "GC", "STATUS"} {
				out := run(cmd, "ctr1", "eth0", conf("1.1.0", dataDir, ipam, top), "")
				Expect(out.Err).NotTo(BeNil(), cmd)
				Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig), cmd)
				Expect(out.Err.Msg).To(ContainSubstring(msg), cmd)
			}
			Expect(run("DEL", "ctr1", "eth0", conf("1.1.0", dataDir, ipam, top), "").Err).To(BeNil())
			expectNothingLeft()
		},
		Entry("subnet", map[string]any{"subnet": "10.1.0.0/33"}, nil, `ipam.subnet: "10.1.0.0/33" is not a CIDR`),
		Entry("rangeStart", ranges(map[string]any{"subnet": "10.1.0.0/24", "rangeStart": "10.2.0.5"}), nil,
			"ipam.ranges[0][0].rangeStart: 10.2.0.5 not in subnet 10.1.0.0/24"),
		Entry("overlap", ranges("10.1.0.0/24", "10.1.0.0/25"), nil, "ipam.ranges[1]: range 10.1.0.1-10.1.0.126 overlaps"),
		Entry("too small", ranges("10.1.0.0/31"), nil, "too small"),
	)

	DescribeTable("refuses ADD-only values with code 7 naming the key, while DEL of the same call still succeeds",
		func(ver string, ipam map[string]any, top map[string]any, cniArgs, msg string) {
			stdin := conf(ver, dataDir, ipam, top)
			out := run("ADD", "ctr1", "eth0", stdin, cniArgs)
			testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
			Expect(out.Err.Msg).To(ContainSubstring(msg))
			// A runtime tears down a failed ADD with the same config and args.
			Expect(run("DEL", "ctr1", "eth0", stdin, cniArgs).Err).To(BeNil())
			expectNothingLeft()
		},
		Entry("requested outside", "1.1.0", ranges("10.1.0.0/24"), map[string]any{"runtimeConfig": map[string]any{"ips": []string{"10.2.0.1"}}}, "",
			"runtimeConfig.ips[0]: 10.2.0.1 not in any range set"),
		Entry("CNI_ARGS IP garbage", "0.4.0", ranges("10.1.0.0/24"), nil, "IP=nonsense",
			`CNI_ARGS IP[0]: "nonsense" is not an IP address`),
		Entry("two IPv4 sets for a 0.2.0 result", "0.2.0", ranges("10.1.0.0/24", "10.2.0.0/24"), nil, "",
			"cniVersion 0.2.0 results hold one IPv4 and one IPv6 address, but 2 IPv4"),
	)

	It("refuses a resolvConf that cannot be read with code 7, reserving nothing", func() {
		ipam := ranges("10.1.0.0/24")
		ipam["resolvConf"] = filepath.Join(dataDir, "missing.conf")
		out := run("ADD", "ctr1", "eth0", conf("1.1.0", dataDir, ipam, nil), "")
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring("ipam.resolvConf"))
		expectNothingLeft()
	})

	It("refuses a network name that would leave dataDir", func() {
		for _, name := range []string{"../escape", "a/b", ".."} {
			m := map[string]any{}
			Expect(json.Unmarshal(conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil), &m)).To(Succeed())
			m["name"] = name
			b, _ := json.Marshal(m)
			out := run("ADD", "ctr1", "eth0", b, "")
			Expect(out.Err).NotTo(BeNil(), name)
			Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig), name)
			_, err := parseConfig(b)
			Expect(result.Code(err)).To(BeEquivalentTo(types.ErrInvalidNetworkConfig), name)
		}
		expectNothingLeft()
		Expect(filepath.Join(filepath.Dir(dataDir), "escape")).NotTo(BeADirectory())
	})

	It("refuses a container ID or ifname that could leave the folder or break the file format, with code 4", func() {
		c := mustParse(conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil), "")
		for _, id := range []string{"../x", "a/b", "a\r\nb", ".."} {
			_, err := add(c, id, "eth0", quiet)
			Expect(result.Code(err)).To(BeEquivalentTo(types.ErrInvalidEnvironmentVariables), id)
			Expect(result.Code(del(c, id, "eth0"))).To(BeEquivalentTo(types.ErrInvalidEnvironmentVariables), id)
			out := run("ADD", id, "eth0", conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil), "")
			Expect(out.Err).NotTo(BeNil(), id)
			Expect(out.Err.Code).To(BeEquivalentTo(types.ErrInvalidEnvironmentVariables), id)
		}
		_, err := add(c, "ctr1", "../eth0", quiet)
		Expect(result.Code(err)).To(BeEquivalentTo(types.ErrInvalidEnvironmentVariables))
		expectNothingLeft()
	})
})
