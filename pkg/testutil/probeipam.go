package testutil

import (
	"os"
	"path/filepath"
	"regexp"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// ProbeIPAM writes into dir (to put on CNI_PATH) an IPAM plugin named
// "probe-ipam" that answers every ADD with the one address addr
// ("10.54.0.2/24") and records, at ADD, what `ip -o link show
// $CNI_IFNAME up` prints in CNI_NETNS. LinkUpAtIPAMAdd reads it back. For
// specs checking upstream's order: the interface exists in the container
// and is up when IPAM ADD runs (the dhcp IPAM plugin leases on it).
func ProbeIPAM(dir, addr string) {
	ginkgo.GinkgoHelper()
	script := `#!/bin/sh
if [ "$CNI_COMMAND" = ADD ]; then
  nsenter --net="$CNI_NETNS" ip -o link show "$CNI_IFNAME" up > "$(dirname "$0")/seen" 2>&1
fi
echo '{"cniVersion": "1.1.0", "ips": [{"address": "` + addr + `"}]}'
`
	gomega.Expect(os.WriteFile(filepath.Join(dir, "probe-ipam"), []byte(script), 0o755)).To(gomega.Succeed())
}

// LinkUpAtIPAMAdd reports whether ProbeIPAM in dir saw ifName up in the
// container at its last ADD, and what it saw.
func LinkUpAtIPAMAdd(dir, ifName string) (bool, string) {
	ginkgo.GinkgoHelper()
	b, err := os.ReadFile(filepath.Join(dir, "seen"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "probe-ipam ran no ADD")
	// "2: eth0@if3: <...,UP,...> ..." (a veth shows its peer after "@");
	// nothing, or "Device ... does not exist", when it was not there up.
	re := regexp.MustCompile(`^\d+: ` + regexp.QuoteMeta(ifName) + `[@:]`)
	return re.Match(b), string(b)
}
