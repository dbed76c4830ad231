package masq

import (
	"net"
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

// BenchmarkSetupTeardown measures one attachment's masquerade ADD + DEL
// (dual-stack) per backend, in a namespace of its own:
//
//	go test -run '^$' -bench SetupTeardown ./pkg/netfilter/
func BenchmarkSetupTeardown(b *testing.B) {
	addrs := []*net.IPNet{
		{IP: net.ParseIP("10.1.0.5").To4(), Mask: net.CIDRMask(24, 32)},
		{IP: net.ParseIP("fd00:1::5"), Mask: net.CIDRMask(64, 128)},
	}
	o := netfilter.Owner{Network: "bench", ContainerID: "ctr-bench", IfName: "eth0"}
	for _, bc := range []struct {
		name string
		m    netfilter.Masq
	}{
		{"iptables-nft", &iptablesMasq{Runner: &iptables.Runner{Variant: "nft"}}},
		{"iptables-legacy", &iptablesMasq{Runner: &iptables.Runner{Variant: "legacy"}}},
		{"nftables", newNFTablesMasq()},
	} {
		for _, v4only := range []bool{true, false} {
			as, name := addrs, bc.name+"/dual-stack"
			if v4only {
				as, name = addrs[:1], bc.name+"/ipv4"
			}
			b.Run(name, func(b *testing.B) {
				hostNS, cleanup, err := testutil.CreateNS()
				if err != nil {
					b.Fatal(err)
				}
				defer cleanup()
				err = hostNS.Do(func() error {
					for b.Loop() {
						if err := bc.m.Setup(o, as); err != nil {
							return err
						}
						if err := bc.m.Teardown(o); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
