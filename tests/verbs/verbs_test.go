package verbs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// configs holds a network config for every plugin binary. A plugin built
// without an entry here fails the suite, so each new plugin is covered.
func configs(dataDir string) map[string]string {
	hostLocal := fmt.Sprintf(`{"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.61.0.0/24"}]]}`, dataDir)
	return map[string]string{
		"loopback":   `{"cniVersion": "1.1.0", "name": "verbs", "type": "loopback"}`,
		"host-local": fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "ptp", "ipam": %s}`, hostLocal),
		"static":     `{"cniVersion": "1.1.0", "name": "verbs", "type": "ptp", "ipam": {"type": "static", "addresses": [{"address": "10.62.0.2/24"}]}}`,
		"bridge":     fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "bridge", "bridge": "verbsbr0", "isGateway": true, "ipMasq": true, "ipam": %s}`, hostLocal),
		"ptp":        fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "verbs", "type": "ptp", "ipMasq": true, "ipam": %s}`, hostLocal),
		"portmap":    `{"cniVersion": "1.1.0", "name": "verbs", "type": "portmap", "runtimeConfig": {"portMappings": [{"hostPort": 8080, "containerPort": 80}]}}`,
	}
}

// builtPlugins lists the plugin binaries build_linux.sh makes: one per cmd/.
func builtPlugins() []string {
	GinkgoHelper()
	dirs, err := filepath.Glob("../../cmd/*")
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, d := range dirs {
		if name := filepath.Base(d); name != "cniforge" {
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

func execIn(n *ns.NetNS, name string, c testutil.Call) testutil.Output {
	GinkgoHelper()
	var out testutil.Output
	Expect(n.Do(func() (err error) {
		out, err = testutil.Exec(name, c)
		return err
	})).To(Succeed())
	return out
}

// masqRules is what iptables and nftables hold in n that names network
// "verbs"; a dump tool that fails fails the spec, so an empty answer means
// "no rules", never "could not look".
func masqRules(n *ns.NetNS) []string {
	GinkgoHelper()
	var found []string
	Expect(n.Do(func() error {
		for _, cmd := range [][]string{{"iptables-save"}, {"nft", "list", "ruleset"}} {
			out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %w: %s", cmd[0], err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "verbs") {
					found = append(found, line)
				}
			}
		}
		return nil
	})).To(Succeed())
	return found
}

var _ = Describe("GC and STATUS with only CNI_COMMAND and CNI_PATH", func() {
	var hostNS *ns.NetNS
	var dataDir string

	BeforeEach(func() {
		hostNS = testutil.NewNS()
		dataDir = GinkgoT().TempDir()
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
				out := execIn(hostNS, name, bare(verb, stdin))
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
			out := execIn(hostNS, name, add)
			Expect(out.Err).To(BeNil(), "ADD: %s", out.Stderr)
			Expect(testutil.Reservations(dataDir)).To(HaveLen(1))
			Expect(masqRules(hostNS)).NotTo(BeEmpty())

			Expect(removeCont()).To(Succeed()) // the container dies, no DEL

			out = execIn(hostNS, name, bare("GC", stdin))
			Expect(out.Err).To(BeNil(), "GC: %s", out.Stderr)
			Expect(testutil.Reservations(dataDir)).To(BeEmpty())
			Expect(masqRules(hostNS)).To(BeEmpty())
			// Nothing in the data dir names the attachment any more: not a
			// reservation, not host-local's index.
			Expect(filepath.WalkDir(dataDir, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if strings.Contains(string(data), "leaked") {
					return fmt.Errorf("%s still names the attachment: %q", p, data)
				}
				return nil
			})).To(Succeed())
		},
		Entry("bridge", "bridge"),
		Entry("ptp", "ptp"),
	)
})
