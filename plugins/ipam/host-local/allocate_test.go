package hostlocal

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("allocation", func() {
	var dataDir string
	BeforeEach(func() { dataDir = GinkgoT().TempDir() })

	small := func() map[string]any {
		return ranges(map[string]any{"subnet": "10.1.0.0/24", "rangeStart": "10.1.0.2", "rangeEnd": "10.1.0.3"})
	}

	It("reports exhaustion naming the range set; STATUS stays available (a full range must not take the node down)", func() {
		stdin := conf("1.1.0", dataDir, small(), nil)
		Expect(run("ADD", "a", "eth0", stdin, "").Err).To(BeNil())
		Expect(run("ADD", "b", "eth0", stdin, "").Err).To(BeNil())

		out := run("ADD", "c", "eth0", stdin, "")
		Expect(out.Err).NotTo(BeNil())
		Expect(out.Err.Msg).To(Equal("no IP addresses available in range set 10.1.0.2-10.1.0.3"))
		Expect(run("STATUS", "", "", stdin, "").Err).To(BeNil(), "containerd 2.x marks the node NotReady on a failed STATUS")
	})

	It("with failStatusWhenFull, STATUS says unavailable (code 50) until an address is freed", func() {
		m := small()
		m["failStatusWhenFull"] = true
		stdin := conf("1.1.0", dataDir, m, nil)
		Expect(run("STATUS", "", "", stdin, "").Err).To(BeNil(), "an empty network is available")
		Expect(run("ADD", "a", "eth0", stdin, "").Err).To(BeNil())
		Expect(run("STATUS", "", "", stdin, "").Err).To(BeNil())
		Expect(run("ADD", "b", "eth0", stdin, "").Err).To(BeNil())

		st := run("STATUS", "", "", stdin, "")
		testutil.ExpectCode(st, result.CodeUnavailable)
		Expect(st.Err.Msg).To(ContainSubstring("10.1.0.2-10.1.0.3"))

		Expect(run("DEL", "a", "eth0", stdin, "").Err).To(BeNil())
		Expect(run("STATUS", "", "", stdin, "").Err).To(BeNil())
		out := run("ADD", "c", "eth0", stdin, "")
		Expect(out.Err).To(BeNil())
		Expect(addrsOf(testutil.ParseResult("1.1.0", out.Stdout))).To(Equal([]string{"10.1.0.2/24"}))
	})

	It("STATUS fails (code 50) when the data folder cannot be used, and names it", func() {
		// A file where the network folder, or one of its parents, should be.
		for _, blocked := range []string{filepath.Join(dataDir, testNet), dataDir} {
			Expect(os.RemoveAll(dataDir)).To(Succeed())
			Expect(os.MkdirAll(filepath.Dir(blocked), 0o755)).To(Succeed())
			Expect(os.WriteFile(blocked, nil, 0o644)).To(Succeed())
			stdin := conf("1.1.0", filepath.Join(dataDir, "sub"), small(), nil)
			if blocked != dataDir {
				stdin = conf("1.1.0", dataDir, small(), nil)
			}
			st := run("STATUS", "", "", stdin, "")
			Expect(st.Err).NotTo(BeNil(), blocked)
			Expect(st.Err.Code).To(BeEquivalentTo(result.CodeUnavailable))
			Expect(st.Err.Msg).To(ContainSubstring(blocked + " is not a folder"))
			Expect(run("ADD", "a", "eth0", stdin, "").Err).NotTo(BeNil(), "STATUS fails only for what stops every ADD")
		}
		Expect(os.RemoveAll(dataDir)).To(Succeed())
		Expect(run("STATUS", "", "", conf("1.1.0", filepath.Join(dataDir, "a", "b"), small(), nil), "").Err).To(BeNil(),
			"a folder ADD can still make is usable")
	})

	// addAll runs ADD for new attachments until the range set of c is
	// exhausted, and returns the addresses handed out and their gateways.
	addAll := func(c *Config) (got, gws []string) {
		GinkgoHelper()
		for i := 0; ; i++ {
			res, err := add(c, fmt.Sprintf("c%d", i), "eth0", quiet)
			if err != nil {
				Expect(err.Error()).To(Equal("no IP addresses available in range set 10.1.0.1-10.1.0.6"))
				return got, gws
			}
			got = append(got, addrsOf(res)...)
			gws = append(gws, res.IPs[0].Gateway.String())
		}
	}

	It("never hands out the gateway or the network or broadcast address", func() {
		got, _ := addAll(mustParse(conf("1.1.0", dataDir, ranges(map[string]any{"subnet": "10.1.0.0/29", "gateway": "10.1.0.3"}), nil), ""))
		Expect(got).To(Equal([]string{"10.1.0.1/29", "10.1.0.2/29", "10.1.0.4/29", "10.1.0.5/29", "10.1.0.6/29"}))
	})

	// Upstream takes a range from the network address to the broadcast
	// address and a gateway outside the subnet (and would hand both ends
	// out): the hosts between are handed out, the ends never, and the
	// gateway takes no host's place.
	It("hands out only the hosts of a range written from network to broadcast, with a gateway outside", func() {
		got, gws := addAll(mustParse(conf("1.1.0", dataDir, ranges(map[string]any{"subnet": "10.1.0.0/29", "gateway": "10.9.0.1",
			"rangeStart": "10.1.0.0", "rangeEnd": "10.1.0.7"}), nil), ""))
		Expect(got).To(Equal([]string{"10.1.0.1/29", "10.1.0.2/29", "10.1.0.3/29", "10.1.0.4/29", "10.1.0.5/29", "10.1.0.6/29"}))
		Expect(gws).To(HaveEach("10.9.0.1"))
	})

	It("goes round-robin from last_reserved_ip and wraps", func() {
		c := mustParse(conf("1.1.0", dataDir, ranges(map[string]any{"subnet": "10.1.0.0/24", "rangeStart": "10.1.0.10", "rangeEnd": "10.1.0.12"}), nil), "")
		next := func(id string) string {
			GinkgoHelper()
			res, err := add(c, id, "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(del(c, id, "eth0")).To(Succeed())
			return res.IPs[0].Address.IP.String()
		}
		Expect([]string{next("a"), next("b"), next("c"), next("d")}).To(Equal([]string{"10.1.0.10", "10.1.0.11", "10.1.0.12", "10.1.0.10"}))
		Expect(readFile(filepath.Join(dataDir, testNet, "last_reserved_ip.0"))).To(Equal("10.1.0.10"))
	})

	It("hands out IPv6 addresses up to the last one of the subnet", func() {
		c := mustParse(conf("1.1.0", dataDir, ranges(map[string]any{"subnet": "fd00::/126"}), nil), "")
		var got []string
		for i := 0; i < 3; i++ {
			res, err := add(c, fmt.Sprintf("c%d", i), "eth0", quiet)
			if err != nil {
				Expect(err.Error()).To(ContainSubstring("no IP addresses available in range set fd00::1-fd00::3"))
				break
			}
			got = append(got, addrsOf(res)...)
		}
		Expect(got).To(Equal([]string{"fd00::2/126", "fd00::3/126"}))
	})

	It("gives dual-stack one address per family and rolls back when a later set is exhausted", func() {
		ipam := ranges("10.1.0.0/24", map[string]any{"subnet": "fd00::/64", "rangeStart": "fd00::5", "rangeEnd": "fd00::5"})
		c := mustParse(conf("1.1.0", dataDir, ipam, nil), "")
		res, err := add(c, "a", "eth0", quiet)
		Expect(err).NotTo(HaveOccurred())
		Expect(addrsOf(res)).To(Equal([]string{"10.1.0.2/24", "fd00::5/64"}))
		Expect(res.IPs[1].Gateway.String()).To(Equal("fd00::1"))

		_, err = add(c, "b", "eth0", quiet)
		Expect(err).To(MatchError("no IP addresses available in range set fd00::5-fd00::5"))
		Expect(reservations(dataDir)).To(Equal(map[string]string{"10.1.0.2": "a\r\neth0", "fd00::5": "a\r\neth0"}),
			"b's IPv4 reservation was undone")
		Expect(del(c, "a", "eth0")).To(Succeed())
		Expect(reservations(dataDir)).To(BeEmpty())
	})

	It("leaves nothing reserved when ADD fails midway", func() {
		c := mustParse(conf("1.1.0", dataDir, ranges("10.1.0.0/24", "fd00::/64"), nil), "")
		// The second set's cursor cannot be written: a folder sits at its name.
		Expect(os.MkdirAll(filepath.Join(dataDir, testNet, "last_reserved_ip.1"), 0o755)).To(Succeed())
		_, err := add(c, "a", "eth0", quiet)
		Expect(err).To(MatchError(ContainSubstring("last_reserved_ip.1")))
		Expect(reservations(dataDir)).To(BeEmpty())
		Expect(check(c, "a", "eth0", nil)).NotTo(Succeed())

		Expect(os.Remove(filepath.Join(dataDir, testNet, "last_reserved_ip.1"))).To(Succeed())
		res, err := add(c, "a", "eth0", quiet)
		Expect(err).NotTo(HaveOccurred())
		Expect(addrsOf(res)).To(Equal([]string{"10.1.0.3/24", "fd00::2/64"}), "round-robin moved past the undone 10.1.0.2")
		Expect(del(c, "a", "eth0")).To(Succeed())
		Expect(reservations(dataDir)).To(BeEmpty())
	})

	It("refuses a second ADD for the same attachment, allows another ifname", func() {
		c := mustParse(conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil), "")
		_, err := add(c, "a", "eth0", quiet)
		Expect(err).NotTo(HaveOccurred())
		_, err = add(c, "a", "eth0", quiet)
		Expect(err).To(MatchError(ContainSubstring("10.1.0.2 is already reserved for container a ifname eth0")))
		_, err = add(c, "a", "eth1", quiet)
		Expect(err).NotTo(HaveOccurred())
		Expect(del(c, "a", "eth0")).To(Succeed())
		Expect(reservations(dataDir)).To(Equal(map[string]string{"10.1.0.3": "a\r\neth1"}))
	})

	It("puts resolvConf into the result DNS", func() {
		path := filepath.Join(dataDir, "resolv.conf")
		writeFile(path, "nameserver 10.0.0.53\ndomain example.com\nsearch a.example\noptions ndots:2\n")
		ipam := ranges("10.1.0.0/24")
		ipam["resolvConf"] = path
		out := run("ADD", "a", "eth0", conf("1.0.0", dataDir, ipam, nil), "")
		Expect(out.Err).To(BeNil())
		res := testutil.ParseResult("1.0.0", out.Stdout)
		Expect(res.DNS).To(Equal(types.DNS{Nameservers: []string{"10.0.0.53"}, Domain: "example.com", Search: []string{"a.example"}, Options: []string{"ndots:2"}}))
	})

	Describe("requested addresses", func() {
		ipam := func() map[string]any { return ranges("10.1.0.0/24", "fd00::/64") }

		It("takes runtimeConfig.ips", func() {
			out := run("ADD", "a", "eth0", conf("1.1.0", dataDir, ipam(), map[string]any{"runtimeConfig": map[string]any{"ips": []string{"10.1.0.40/24", "fd00::40"}}}), "")
			Expect(out.Err).To(BeNil())
			Expect(addrsOf(testutil.ParseResult("1.1.0", out.Stdout))).To(Equal([]string{"10.1.0.40/24", "fd00::40/64"}))
		})

		It("takes args.cni.ips and ignores CNI_ARGS then", func() {
			out := run("ADD", "a", "eth0", conf("1.1.0", dataDir, ipam(), map[string]any{"args": map[string]any{"cni": map[string]any{"ips": []string{"10.1.0.41"}}}}),
				"IgnoreUnknown=1;IP=10.1.0.99")
			Expect(out.Err).To(BeNil())
			Expect(addrsOf(testutil.ParseResult("1.1.0", out.Stdout))).To(Equal([]string{"10.1.0.41/24", "fd00::2/64"}))
		})

		It("takes CNI_ARGS IP, comma-separated", func() {
			out := run("ADD", "a", "eth0", conf("0.3.1", dataDir, ipam(), nil), "K8S_POD_NAME=x;IP=fd00::42,10.1.0.42")
			Expect(out.Err).To(BeNil())
			Expect(addrsOf(testutil.ParseResult("0.3.1", out.Stdout))).To(Equal([]string{"10.1.0.42/24", "fd00::42/64"}))
		})

		It("prefers runtimeConfig.ips over args over CNI_ARGS", func() {
			top := map[string]any{
				"runtimeConfig": map[string]any{"ips": []string{"10.1.0.43"}},
				"args":          map[string]any{"cni": map[string]any{"ips": []string{"10.1.0.44"}}},
			}
			out := run("ADD", "a", "eth0", conf("1.1.0", dataDir, ipam(), top), "IP=10.1.0.45")
			Expect(out.Err).To(BeNil())
			Expect(addrsOf(testutil.ParseResult("1.1.0", out.Stdout))[0]).To(Equal("10.1.0.43/24"))
		})

		It("fails, naming it, when the requested address is taken, and leaves nothing", func() {
			stdin := conf("1.1.0", dataDir, ipam(), nil)
			Expect(run("ADD", "a", "eth0", stdin, "IP=10.1.0.46").Err).To(BeNil())
			out := run("ADD", "b", "eth0", stdin, "IP=10.1.0.46")
			Expect(out.Err).NotTo(BeNil())
			Expect(out.Err.Msg).To(Equal("requested IP address 10.1.0.46 is not available in range set 10.1.0.1-10.1.0.254"))
			Expect(reservations(dataDir)).To(HaveLen(2))
		})
	})

	It("prepends runtimeConfig.ipRanges to the configured range sets, as upstream does", func() {
		top := map[string]any{"runtimeConfig": map[string]any{"ipRanges": []any{[]any{map[string]any{"subnet": "10.5.0.0/24"}}}}}
		out := run("ADD", "a", "eth0", conf("1.1.0", dataDir, ranges("fd00::/64"), top), "")
		Expect(out.Err).To(BeNil())
		Expect(addrsOf(testutil.ParseResult("1.1.0", out.Stdout))).To(Equal([]string{"10.5.0.2/24", "fd00::2/64"}))
		Expect(readFile(filepath.Join(dataDir, testNet, "last_reserved_ip.0"))).To(Equal("10.5.0.2"))
		Expect(readFile(filepath.Join(dataDir, testNet, "last_reserved_ip.1"))).To(Equal("fd00::2"))
	})

	Describe("concurrency", func() {
		const n = 30

		It("gives 30 concurrent in-process ADDs 30 distinct addresses", func() {
			c := mustParse(conf("1.1.0", dataDir, ranges("10.1.0.0/24", "fd00::/64"), nil), "")
			var wg sync.WaitGroup
			got := make([][]string, n)
			errs := make([]error, n)
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					res, err := add(c, fmt.Sprintf("ctr%d", i), "eth0", quiet)
					errs[i] = err
					if err == nil {
						got[i] = addrsOf(res)
					}
				}(i)
			}
			wg.Wait()
			seen := map[string]bool{}
			for i := 0; i < n; i++ {
				Expect(errs[i]).NotTo(HaveOccurred())
				for _, a := range got[i] {
					Expect(seen).NotTo(HaveKey(a))
					seen[a] = true
				}
			}
			Expect(seen).To(HaveLen(2 * n))
			Expect(reservations(dataDir)).To(HaveLen(2 * n))
			for i := 0; i < n; i++ {
				Expect(check(c, fmt.Sprintf("ctr%d", i), "eth0", nil)).To(Succeed())
			}
		})

		It("gives 30 concurrent plugin processes 30 distinct addresses, and 30 concurrent DELs free them", func() {
			stdin := conf("1.0.0", dataDir, ranges("10.1.0.0/24"), nil)
			exec := func(cmd string, i int) (testutil.Output, error) {
				return testutil.Exec("host-local", testutil.Call{
					Command: cmd, ContainerID: fmt.Sprintf("ctr%d", i), IfName: "eth0", Netns: unusedNetns, Stdin: stdin,
				})
			}
			// execAll runs cmd for ctr0..ctr<n-1> at once and waits for all.
			execAll := func(cmd string) ([]testutil.Output, []error) {
				outs := make([]testutil.Output, n)
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						outs[i], errs[i] = exec(cmd, i)
					}(i)
				}
				wg.Wait()
				return outs, errs
			}
			outs, errs := execAll("ADD")
			seen := map[string]bool{}
			for i := 0; i < n; i++ {
				Expect(errs[i]).NotTo(HaveOccurred())
				Expect(outs[i].Err).To(BeNil(), string(outs[i].Stderr))
				a := addrsOf(testutil.ParseResult("1.0.0", outs[i].Stdout))[0]
				Expect(seen).NotTo(HaveKey(a))
				seen[a] = true
			}
			Expect(reservations(dataDir)).To(HaveLen(n))

			outs, errs = execAll("DEL")
			for i := 0; i < n; i++ {
				Expect(errs[i]).NotTo(HaveOccurred())
				Expect(outs[i].Err).To(BeNil())
			}
			Expect(reservations(dataDir)).To(BeEmpty())
		})
	})
})

var _ = Describe("GC", func() {
	var dataDir string
	BeforeEach(func() { dataDir = GinkgoT().TempDir() })

	It("releases every reservation whose attachment is not listed, keeping lock and last_reserved_ip", func() {
		stdin := conf("1.1.0", dataDir, ranges("10.1.0.0/24", "fd00::/64"), nil)
		for _, at := range [][2]string{{"a", "eth0"}, {"b", "eth0"}, {"c", "eth1"}, {"c", "eth0"}} {
			Expect(run("ADD", at[0], at[1], stdin, "").Err).To(BeNil())
		}
		gcIn := conf("1.1.0", dataDir, ranges("10.1.0.0/24", "fd00::/64"), map[string]any{
			"cni.dev/valid-attachments": []map[string]string{{"containerID": "a", "ifname": "eth0"}, {"containerID": "c", "ifname": "eth1"}},
		})
		Expect(run("GC", "", "", gcIn, "").Err).To(BeNil())
		Expect(reservations(dataDir)).To(Equal(map[string]string{
			"10.1.0.2": "a\r\neth0", "fd00::2": "a\r\neth0",
			"10.1.0.4": "c\r\neth1", "fd00::4": "c\r\neth1",
		}))
		Expect(topLevel(dataDir)).To(ContainElements("lock", "last_reserved_ip.0", "last_reserved_ip.1"))
		// The index follows: b is gone, a and c/eth1 still DEL cleanly.
		c := mustParse(stdin, "")
		Expect(del(c, "b", "eth0")).To(Succeed())
		Expect(del(c, "a", "eth0")).To(Succeed())
		Expect(del(c, "c", "eth1")).To(Succeed())
		Expect(reservations(dataDir)).To(BeEmpty())
	})

	DescribeTable("with no attachments listed releases everything, and succeeds on a network never used",
		func(list any) {
			stdin := conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil)
			gcIn := conf("1.1.0", dataDir, ranges("10.1.0.0/24"), map[string]any{"cni.dev/valid-attachments": list})
			Expect(run("GC", "", "", gcIn, "").Err).To(BeNil())
			Expect(filepath.Join(dataDir, testNet)).NotTo(BeADirectory())
			Expect(run("ADD", "a", "eth0", stdin, "").Err).To(BeNil())
			Expect(run("GC", "", "", gcIn, "").Err).To(BeNil())
			Expect(reservations(dataDir)).To(BeEmpty())
		},
		Entry("null (as libcni sends an empty list)", nil),
		Entry("[]", []any{}),
	)

	// cnitool gc and libcni's GCNetworkList(ctx, list, nil) send no key,
	// having run DEL for every cached attachment first: "no list" is "none
	// is valid".
	It("releases everything when cni.dev/valid-attachments is absent", func() {
		stdin := conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil)
		Expect(run("ADD", "a", "eth0", stdin, "").Err).To(BeNil())
		Expect(reservations(dataDir)).To(HaveLen(1))
		Expect(run("GC", "", "", stdin, "").Err).To(BeNil())
		Expect(reservations(dataDir)).To(BeEmpty())
	})

	DescribeTable("refuses a malformed entry with code 7 naming its index, releasing nothing",
		func(entry any, want string) {
			stdin := conf("1.1.0", dataDir, ranges("10.1.0.0/24"), nil)
			Expect(run("ADD", "a", "eth0", stdin, "").Err).To(BeNil())
			gcIn := conf("1.1.0", dataDir, ranges("10.1.0.0/24"), map[string]any{"cni.dev/valid-attachments": []any{
				map[string]string{"containerID": "a", "ifname": "eth0"}, entry}})
			out := run("GC", "", "", gcIn, "")
			testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
			Expect(out.Err.Msg).To(HavePrefix(want))
			Expect(reservations(dataDir)).To(Equal(map[string]string{"10.1.0.2": "a\r\neth0"}))
		},
		Entry("null", nil, "cni.dev/valid-attachments[1]: "),
		Entry("{}", map[string]any{}, `cni.dev/valid-attachments[1]: "containerID": missing`),
		Entry("a number for ifname", map[string]any{"containerID": "b", "ifname": 3}, `cni.dev/valid-attachments[1]: "ifname": 3 is not`),
	)

	It("refuses a cni.dev/valid-attachments that is not a list with code 7", func() {
		gcIn := conf("1.1.0", dataDir, ranges("10.1.0.0/24"), map[string]any{"cni.dev/valid-attachments": "a"})
		out := run("GC", "", "", gcIn, "")
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(HavePrefix("cni.dev/valid-attachments: want"))
	})
})

var _ = Describe("status without reservations folder", func() {
	It("is available", func() {
		c := mustParse(conf("1.1.0", GinkgoT().TempDir(), ranges("10.1.0.0/24"), nil), "")
		Expect(status(c)).To(Succeed())
	})
	It("with failStatusWhenFull, is unavailable once any range set is full", func() {
		dataDir := GinkgoT().TempDir()
		in := ranges("10.1.0.0/24", map[string]any{"subnet": "10.2.0.0/24", "rangeStart": "10.2.0.9", "rangeEnd": "10.2.0.9"})
		in["failStatusWhenFull"] = true
		c := mustParse(conf("1.1.0", dataDir, in, nil), "")
		_, err := add(c, "a", "eth0", quiet)
		Expect(err).NotTo(HaveOccurred())
		err = status(c)
		Expect(result.Code(err)).To(BeEquivalentTo(result.CodeUnavailable))
		Expect(err).To(MatchError("no IP addresses available in range set 10.2.0.9-10.2.0.9"))
	})
})
