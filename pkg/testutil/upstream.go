package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
)

// UpstreamDir holds Debian's build of upstream's plugins (1.1.1, the
// containernetworking-plugins package), installed with podman.
const UpstreamDir = "/usr/lib/cni"

// RunUpstream runs upstream's plugin name from UpstreamDir inside hostNS
// for c (its Command, ContainerID, Netns, IfName and Stdin, with
// CNI_PATH=UpstreamDir and PATH alone besides) and returns what it printed.
// A spec that needs it fails when it is missing: upstream's binaries are
// the second source of upstream-made state (issue 22), never skipped.
func RunUpstream(hostNS *ns.NetNS, name string, c Call) []byte {
	ginkgo.GinkgoHelper()
	bin := filepath.Join(UpstreamDir, name)
	_, err := os.Stat(bin)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "upstream's %s (Debian's containernetworking-plugins) is needed here", name)
	var out, stderr bytes.Buffer
	err = hostNS.Do(func() error {
		cmd := exec.Command(bin)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CNI_COMMAND=" + c.Command, "CNI_CONTAINERID=" + c.ContainerID,
			"CNI_NETNS=" + c.Netns, "CNI_IFNAME=" + c.IfName, "CNI_PATH=" + UpstreamDir}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(c.Stdin), &out, &stderr
		return cmd.Run()
	})
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "upstream %s: %s %s", c.Command, out.String(), stderr.String())
	return out.Bytes()
}
