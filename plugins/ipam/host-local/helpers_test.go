package hostlocal

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/testutil"
)

const testNet = "testnet"

// unusedNetns satisfies skel (ADD and CHECK need CNI_NETNS set); host-local
// never opens it.
const unusedNetns = "/run/netns/host-local-never-opened"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// conf builds a network config for host-local; ipam is merged over
// {"type":"host-local","dataDir":dataDir}, top over the top level.
func conf(ver, dataDir string, ipam, top map[string]any) []byte {
	GinkgoHelper()
	im := map[string]any{"type": "host-local", "dataDir": dataDir}
	for k, v := range ipam {
		im[k] = v
	}
	m := map[string]any{"cniVersion": ver, "name": testNet, "type": "host-local", "ipam": im}
	for k, v := range top {
		m[k] = v
	}
	b, err := json.Marshal(m)
	Expect(err).NotTo(HaveOccurred())
	return b
}

func ranges(subnets ...any) map[string]any {
	var sets []any
	for _, s := range subnets {
		switch s := s.(type) {
		case string:
			sets = append(sets, []any{map[string]any{"subnet": s}})
		default:
			sets = append(sets, []any{s})
		}
	}
	return map[string]any{"ranges": sets}
}

func mustParse(stdin []byte, cniArgs string) *Config {
	GinkgoHelper()
	c, err := parseAddConfig(stdin, cniArgs)
	Expect(err).NotTo(HaveOccurred())
	return c
}

// run runs the plugin in-process through skel.
func run(cmd, id, ifName string, stdin []byte, cniArgs string) testutil.Output {
	GinkgoHelper()
	netns := unusedNetns
	if cmd == "DEL" || cmd == "GC" || cmd == "STATUS" {
		netns = "" // these must work without one
	}
	out, err := testutil.Run(Plugin, testutil.Call{
		Command: cmd, ContainerID: id, IfName: ifName, Netns: netns, Args: cniArgs, Stdin: stdin,
		Path: "/nonexistent",
	})
	Expect(err).NotTo(HaveOccurred())
	return out
}

func addrsOf(res *current.Result) []string {
	var out []string
	for _, ip := range res.IPs {
		out = append(out, ip.Address.String())
	}
	return out
}

// reservations lists the per-address files of the network as ip -> content.
func reservations(dataDir string) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	entries, err := os.ReadDir(filepath.Join(dataDir, testNet))
	if os.IsNotExist(err) {
		return out
	}
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || n == "lock" || strings.HasPrefix(n, "last_reserved_ip.") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dataDir, testNet, n))
		Expect(err).NotTo(HaveOccurred())
		out[n] = string(b)
	}
	return out
}

// topLevel lists the names in the network folder.
func topLevel(dataDir string) []string {
	GinkgoHelper()
	entries, err := os.ReadDir(filepath.Join(dataDir, testNet))
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func writeFile(path, content string) {
	GinkgoHelper()
	Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
	Expect(os.WriteFile(path, []byte(content), 0o600)).To(Succeed())
}

func readFile(path string) string {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// upstreamMatches mimics how upstream host-local finds a container's
// reservations: it walks the network folder recursively and compares every
// file's trimmed content with "<id>\r\n<ifname>" or "<id>". It returns the
// paths (relative to the folder) that upstream would take as the container's.
func upstreamMatches(dataDir, id, ifName string) []string {
	GinkgoHelper()
	return filesMatching(dataDir, true, func(s string) bool { return s == id+"\r\n"+ifName || s == id })
}

// naming lists the files under the network folder (index and temp files
// included) that name container id: a reservation or temp file whose
// content is "<id>\r\n..." or "<id>", or an index file with a line that is
// id (index entries hold the ID on a line of its own). After DEL of id, or
// a GC that does not list it, there must be none (issue 7).
func naming(dataDir, id string) []string {
	GinkgoHelper()
	return filesMatching(dataDir, false, func(s string) bool {
		named := s == id || strings.HasPrefix(s, id+"\r\n")
		for _, l := range strings.Split(s, "\n") {
			named = named || l == id
		}
		return named
	})
}

// filesMatching walks the network folder and returns, sorted and relative
// to it, the files whose trimmed content match accepts. A missing folder
// has none. Any other walk or read error fails the spec, unless lenient:
// then, as upstream does, what cannot be read is passed over.
func filesMatching(dataDir string, lenient bool, match func(content string) bool) []string {
	GinkgoHelper()
	root := filepath.Join(dataDir, testNet)
	var out []string
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil && (lenient || os.IsNotExist(err)) {
			return nil
		}
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil && lenient {
			return nil
		}
		if err != nil {
			return err
		}
		if match(strings.TrimSpace(string(b))) {
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
		}
		return nil
	})
	Expect(err).NotTo(HaveOccurred())
	sort.Strings(out)
	return out
}

// editIndex runs edit on the network's index, invalidated for a change,
// and commits it: an index as an older build, a crash or a hand edit left
// it.
func editIndex(dataDir string, edit func(ix *index)) {
	GinkgoHelper()
	s, err := openStore(dataDir, testNet, false)
	Expect(err).NotTo(HaveOccurred())
	ix, err := s.loadIndex()
	Expect(err).NotTo(HaveOccurred())
	Expect(ix.invalidate()).To(Succeed())
	edit(ix)
	Expect(ix.commit()).To(Succeed())
	Expect(s.close()).To(Succeed())
}
