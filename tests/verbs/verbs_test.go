package verbs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/companion"
)

// configs holds a network config for every plugin binary. A plugin built
// without an entry here fails the suite, so each new plugin is covered.
func configs(dataDir string) map[string]string {
	hostLocal := fmt.Sprintf(`{"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.61.0.0/24"}]]}`, dataDir)
	return map[string]string{
		"loopback":    `{"cniVersion": "1.1.0", "name": "verbs", "type": "loopback"}`,
		"host-local":  fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "ptp", "ipam": %s}`, hostLocal),
		"static":      `{"cniVersion": "1.1.0", "name": "verbs", "type": "ptp", "ipam": {"type": "static", "addresses": [{"address": "10.62.0.2/24"}]}}`,
		"bridge":      fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "bridge", "bridge": "verbsbr0", "isGateway": true, "ipMasq": true, "ipam": %s}`, hostLocal),
		"ptp":         fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "ptp", "ipMasq": true, "ipam": %s}`, hostLocal),
		"host-device": fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "host-device", "device": "verbs0", "ipam": %s}`, hostLocal),
		"tap":         fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "tap", "ipam": %s}`, hostLocal),
		// The dhcp daemon that startDHCPDaemon runs serves this socket.
		"dhcp": fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "ptp", "ipam": {"type": "dhcp", "daemonSocketPath": %q}}`,
			dhcpSock(dataDir)),
		"bandwidth": `{"cniVersion": "1.1.0", "name": "verbs", "type": "bandwidth", "ingressRate": 8000, "ingressBurst": 8000}`,
		"sbr":       `{"cniVersion": "1.1.0", "name": "verbs", "type": "sbr", "table": 300}`,
		"vrf":       `{"cniVersion": "1.1.0", "name": "verbs", "type": "vrf", "vrfname": "verbsvrf"}`,
		"tuning":    fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "tuning", "dataDir": %q, "mtu": 1400, "sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1"}}`, dataDir),
		"macvlan":   fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "macvlan", "master": "verbs0", "ipam": %s}`, hostLocal),
		"ipvlan":    fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "ipvlan", "master": "verbs0", "ipam": %s}`, hostLocal),
		"vlan":      fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "vlan", "master": "verbs0", "vlanId": 100, "ipam": %s}`, hostLocal),
		"dummy":     fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "dummy", "ipam": %s}`, hostLocal),
		"firewall":  `{"cniVersion": "1.1.0", "name": "verbs", "type": "firewall", "backend": ""}`,
		"portmap":   `{"cniVersion": "1.1.0", "name": "verbs", "type": "portmap", "runtimeConfig": {"portMappings": [{"hostPort": 8080, "containerPort": 80}]}}`,
	}
}

// builtPlugins lists the plugin binaries build_linux.sh makes: one per cmd/.
func builtPlugins() []string {
	GinkgoHelper()
	dirs, err := filepath.Glob("../../cmd/*")
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, d := range dirs {
		// The multicalls (cniforge and its companions) are no plugin of
		// their own: each answers as the plugin its argv[0] names.
		if name := filepath.Base(d); name != "cniforge" && !slices.Contains(companion.Binaries(), name) {
			names = append(names, name)
		}
	}
	Expect(names).NotTo(BeEmpty())
	return names
}

// bare is a call with nothing but CNI_COMMAND and CNI_PATH in the environment.
func bare(cmd, stdin string) testutil.Call {
	return testutil.Call{Command: cmd, Stdin: []byte(stdin)}
}

// masqRules lists the lines of n's whole netfilter ruleset that name
// network "verbs" (testutil.NetfilterRuleset fails the spec when a dump tool
// fails, so "none" never means "could not look").
func masqRules(n *ns.NetNS) []string {
	GinkgoHelper()
	var found []string
	for _, line := range strings.Split(testutil.NetfilterRuleset(n), "\n") {
		if strings.Contains(line, "verbs") {
			found = append(found, line)
		}
	}
	return found
}

var _ = Describe("GC and STATUS with only CNI_COMMAND and CNI_PATH", func() {
	var hostNS *ns.NetNS
	var dataDir string

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		dataDir = GinkgoT().TempDir()
		startDHCPDaemon(hostNS, dataDir)
	})

	It("has a config here for every plugin binary", func() {
		confs := configs(dataDir)
		for _, name := range builtPlugins() {
			Expect(confs).To(HaveKey(name), "add a config for %s to tests/verbs", name)
		}
	})

	for _, verb := range []string{"GC", "STATUS"} {
		It(verb+" succeeds on every plugin, printing nothing", func() {
			confs := configs(dataDir)
			for _, name := range builtPlugins() {
				stdin := strings.Replace(confs[name], `"type": "ptp"`, fmt.Sprintf(`"type": %q`, name), 1)
				out := testutil.ExecIn(hostNS, name, bare(verb, stdin))
				Expect(out.Err).To(BeNil(), "%s %s: %s", name, verb, out.Stderr)
				Expect(out.Stdout).To(BeEmpty(), "%s %s", name, verb)
			}
		})
	}

	// cnitool gc on a network whose container died without a DEL, and whose
	// runtime lost its cache: GC with no list releases the addresses and rules.
	DescribeTable("GC with no list reclaims a leaked attachment",
		func(name string) {
			stdin := configs(dataDir)[name]
			contNS, removeCont, err := testutil.CreateNS()
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = removeCont() }) // best effort: removed below already
			add := testutil.Call{Command: "ADD", ContainerID: "leaked", Netns: contNS.Path(), IfName: "eth0", Stdin: []byte(stdin)}
			out := testutil.ExecIn(hostNS, name, add)
			Expect(out.Err).To(BeNil(), "ADD: %s", out.Stderr)
			Expect(testutil.Reservations(dataDir)).To(HaveLen(1))
			Expect(masqRules(hostNS)).NotTo(BeEmpty())

			Expect(removeCont()).To(Succeed()) // the container dies, no DEL

			out = testutil.ExecIn(hostNS, name, bare("GC", stdin))
			Expect(out.Err).To(BeNil(), "GC: %s", out.Stderr)
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
			Expect(masqRules(hostNS)).To(BeEmpty())
			// Nothing in the data dir names the attachment any more: not a
			// reservation, not host-local's index.
			testutil.WalkFiles(dataDir, func(p string, data []byte) {
				Expect(string(data)).NotTo(ContainSubstring("leaked"), "%s still names the attachment", p)
			})
		},
		Entry("bridge", "bridge"),
		Entry("ptp", "ptp"),
	)
})

// dhcpSock is beside dataDir, not in it: a spec reads every file in dataDir.
func dhcpSock(dataDir string) string { return dataDir + ".dhcp.sock" }

// startDHCPDaemon runs bin/dhcp daemon on dhcpSock(dataDir) until the spec
// ends: dhcp's STATUS fails (code 50) when no daemon answers.
func startDHCPDaemon(hostNS *ns.NetNS, dataDir string) {
	GinkgoHelper()
	sock, tmp := dhcpSock(dataDir), GinkgoT().TempDir()
	testutil.StartDHCPDaemon(hostNS, sock, filepath.Join(tmp, "state"), filepath.Join(tmp, "daemon.log"))
	DeferCleanup(func() { _ = os.Remove(sock) }) // SIGKILL leaves the socket file; already gone is fine
}
