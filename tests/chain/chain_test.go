package chain_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/containernetworking/cni/libcni"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/meta/bandwidth"
)

// The full chain bridge (ipMasq) → portmap (snat) → bandwidth → tuning →
// firewall through libcni, as a runtime runs it: ADD, CHECK and DEL, with a
// host port that reaches the container. CHECK covers bridge's reading of a
// result that bandwidth extended: the ifb comes after the host veth.
func chainConf(ver, dataDir, tuningDir string) []byte {
	return []byte(fmt.Sprintf(`{
  "cniVersion": %q,
  "name": "chainnet",
  "plugins": [
    {"type": "bridge", "bridge": "chainbr0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.77.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}},
    {"type": "tuning", "dataDir": %q, "mtu": 1400, "txQLen": 77, "sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1"}},
    {"type": "firewall", "backend": "iptables"}
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

// hostPortAnswers serves one TCP connection on listen in contNS and returns
// what a client in hostNS reads from dst.
func hostPortAnswers(hostNS, contNS *ns.NetNS, dst, listen string) (string, error) {
	var ln net.Listener
	if err := contNS.Do(func() (err error) {
		ln, err = net.Listen("tcp", listen)
		return err
	}); err != nil {
		return "", err
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_, _ = c.Write([]byte("hello from chain1")) // the client's read is the assertion
			c.Close()
		}
	}()
	var got []byte
	err := hostNS.Do(func() error {
		c, err := net.DialTimeout("tcp", dst, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
			return err
		}
		got, err = io.ReadAll(c)
		return err
	})
	return string(got), err
}

var _ = Describe("bridge → portmap → bandwidth → tuning → firewall through libcni", func() {
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
					CapabilityArgs: map[string]any{
						"bandwidth": map[string]any{
							"ingressRate": 8000000, "ingressBurst": 800000, "egressRate": 8000000, "egressBurst": 800000},
						"portMappings": []map[string]any{{"hostPort": 18080, "containerPort": 8080, "protocol": "tcp"}},
					}}
				Expect(hostNS.Do(func() error {
					if _, err := cni.AddNetworkList(context.Background(), list, rt); err != nil {
						return fmt.Errorf("ADD: %w", err)
					}
					return nil
				})).To(Succeed())
				Expect(testutil.LinkNames(hostNS)).To(ContainElement(ifb))
				Expect(files(tuningDir)).To(HaveLen(1))
				Expect(testutil.Ping(contNS, "10.77.0.1")).To(Succeed())
				Expect(testutil.NetfilterRuleset(hostNS)).To(And(
					ContainSubstring("CNI-HOSTPORT-DNAT"), ContainSubstring("CNI-FORWARD"), ContainSubstring("chain1")))
				// The host port reaches the container's listener, from the host
				// to its own bridge address (DNAT of locally destined traffic).
				Expect(hostPortAnswers(hostNS, contNS, "10.77.0.1:18080", ":8080")).To(Equal("hello from chain1"))
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
				Expect(testutil.NetfilterRuleset(hostNS)).NotTo(ContainSubstring("chain1"))
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
