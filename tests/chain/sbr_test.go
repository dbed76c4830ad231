package chain_test

import (
	"context"
	"fmt"
	"net"

	"github.com/containernetworking/cni/libcni"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// A main plugin followed by sbr through libcni (issue 22): sbr moves the
// interface's routes into a table of its own, looked up from the
// interface's address. The main plugin's CHECK finds them there, and fails
// when one is in neither table.
func sbrChainConf(mainPlugin, dataDir string) []byte {
	main := `{"type": "ptp"`
	if mainPlugin == "bridge" {
		main = `{"type": "bridge", "bridge": "sbrbr0", "isGateway": true`
	}
	return []byte(fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "sbrnet",
  "plugins": [
    %s, "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.250.1.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}, {"dst": "10.99.0.0/16"}]}},
    {"type": "sbr"}
  ]
}`, main, dataDir))
}

// sbrTableRoute deletes from sbr's table (the one a rule from the
// container's address looks up) the route to dst on eth0.
func deleteSbrTableRoute(contNS *ns.NetNS, dst string) error {
	h := testutil.Handle(contNS)
	defer h.Close()
	_, want, err := net.ParseCIDR(dst)
	if err != nil {
		return err
	}
	rules, err := h.RuleList(netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	for _, r := range rules {
		if r.Src == nil || r.Table == 254 || r.Table == 255 || r.Table == 253 {
			continue
		}
		routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: r.Table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, rt := range routes {
			if rt.Dst != nil && rt.Dst.String() == want.String() {
				return h.RouteDel(&rt)
			}
		}
	}
	return fmt.Errorf("no route to %s in a table a source rule looks up", dst)
}

var _ = Describe("main plugin → sbr through libcni", func() {
	for _, mainPlugin := range []string{"ptp", "bridge"} {
		It(mainPlugin+": CHECK passes after ADD and fails when a moved route is gone", func() {
			hostNS, contNS := testutil.NewNS(), testutil.NewNS()
			list, err := libcni.ConfListFromBytes(sbrChainConf(mainPlugin, GinkgoT().TempDir()))
			Expect(err).NotTo(HaveOccurred())
			cni := libcni.NewCNIConfigWithCacheDir([]string{testutil.BinDir()}, GinkgoT().TempDir(), nil)
			rt := &libcni.RuntimeConf{ContainerID: "sbr1", NetNS: contNS.Path(), IfName: "eth0"}
			run := func(what string, f func() error) error {
				return hostNS.Do(func() error {
					if err := f(); err != nil {
						return fmt.Errorf("%s: %w", what, err)
					}
					return nil
				})
			}
			Expect(run("ADD", func() error { _, err := cni.AddNetworkList(context.Background(), list, rt); return err })).To(Succeed())
			DeferCleanup(func() {
				Expect(run("DEL", func() error { return cni.DelNetworkList(context.Background(), list, rt) })).To(Succeed())
			})
			// Nothing of eth0's is left in main: sbr moved it all.
			Expect(testutil.Routes(contNS)).NotTo(ContainElement(ContainSubstring("eth0")))
			Expect(run("CHECK", func() error { return cni.CheckNetworkList(context.Background(), list, rt) })).To(Succeed())

			Expect(deleteSbrTableRoute(contNS, "10.99.0.0/16")).To(Succeed())
			err = run("CHECK", func() error { return cni.CheckNetworkList(context.Background(), list, rt) })
			Expect(err).To(MatchError(ContainSubstring("lacks route 10.99.0.0/16")))
		})
	}
})
