package chain_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/containernetworking/cni/libcni"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/bandwidth"
)

// The chain bridge → bandwidth → tuning through libcni, as a runtime runs
// it: ADD, CHECK and DEL. (portmap and firewall, which complete upstream's
// usual chain, are not in it yet.) CHECK covers bridge's reading of a result
// that bandwidth extended: the ifb comes after the host veth.
func chainConf(ver, dataDir, tuningDir string) []byte {
	return []byte(fmt.Sprintf(`{
  "cniVersion": %q,
  "name": "chainnet",
  "plugins": [
    {"type": "bridge", "bridge": "chainbr0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.77.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}},
    {"type": "tuning", "dataDir": %q, "mtu": 1400, "txQLen": 77, "sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1"}}
  ]
}`, ver, dataDir, tuningDir))
}

func files(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

var _ = Describe("bridge → bandwidth → tuning through libcni", func() {
	for _, ver := range []string{"0.4.0", "1.0.0", "1.1.0"} {
		It("ADD, CHECK, DEL at "+ver+", leaving nothing, twice the same", func() {
			hostNS := testutil.NewNS()
			dataDir, tuningDir := GinkgoT().TempDir(), GinkgoT().TempDir()
			list, err := libcni.ConfListFromBytes(chainConf(ver, dataDir, tuningDir))
			Expect(err).NotTo(HaveOccurred())
			cni := libcni.NewCNIConfigWithCacheDir([]string{testutil.BinDir()}, GinkgoT().TempDir(), nil)
			ifb := bandwidth.IfbName("chainnet", "chain1")

			cycle := func() testutil.Snapshot {
				contNS := testutil.NewNS()
				rt := &libcni.RuntimeConf{ContainerID: "chain1", NetNS: contNS.Path(), IfName: "eth0",
					CapabilityArgs: map[string]any{"bandwidth": map[string]any{
						"ingressRate": 8000000, "ingressBurst": 800000, "egressRate": 8000000, "egressBurst": 800000}}}
				Expect(hostNS.Do(func() error {
					if _, err := cni.AddNetworkList(context.Background(), list, rt); err != nil {
						return fmt.Errorf("ADD: %w", err)
					}
					return nil
				})).To(Succeed())
				Expect(testutil.LinkNames(hostNS)).To(ContainElement(ifb))
				Expect(files(tuningDir)).To(HaveLen(1))
				Expect(testutil.Ping(contNS, "10.77.0.1")).To(Succeed())
				Expect(hostNS.Do(func() error {
					if err := cni.CheckNetworkList(context.Background(), list, rt); err != nil {
						return fmt.Errorf("CHECK: %w", err)
					}
					return nil
				})).To(Succeed())
				Expect(hostNS.Do(func() error {
					if err := cni.DelNetworkList(context.Background(), list, rt); err != nil {
						return fmt.Errorf("DEL: %w", err)
					}
					return nil
				})).To(Succeed())
				Expect(testutil.LinkNames(hostNS)).NotTo(ContainElement(ifb))
				Expect(files(tuningDir)).To(BeEmpty())
				Expect(testutil.Reservations(dataDir)).To(BeEmpty())
				return testutil.TakeSnapshot(hostNS, contNS, dataDir)
			}
			first := cycle()
			second := cycle()
			// The container namespaces differ; what the host holds must not.
			Expect(second.HostLinks).To(Equal(first.HostLinks))
			Expect(second.HostAddrs).To(Equal(first.HostAddrs))
			Expect(second.HostRoutes).To(Equal(first.HostRoutes))
			Expect(second.Files).To(Equal(first.Files))
		})
	}
})
