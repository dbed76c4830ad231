package dhcp

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
)

// FuzzDHCPConfig: any stdin parses as every verb parses it (the config,
// GC's list) without a panic or a hang, the same way twice, or fails with
// a CNI error. dhcp reads no CNI_ARGS itself (it passes them to the
// daemon), but the fuzzer varies them anyway. The seeds in testdata/fuzz
// are the configs the tests use.
func FuzzDHCPConfig(f *testing.F) {
	testutil.FuzzConfig(f, func(stdin []byte, _ string) (any, error) {
		conf, err := parseConfig(stdin)
		if err != nil {
			return nil, err
		}
		valid, err := result.GCAttachments(stdin)
		if err != nil {
			return nil, err
		}
		return []any{conf, valid}, nil
	}, `{"cniVersion": "1.1.0", "name": "fuzz", "type": "macvlan", "ipam": {"type": "dhcp"}}`)
}

// FuzzDHCPLease: whatever a lease file in the daemon's state folder holds
// (the file itself; and a DHCPv4 ACK and DHCPv6 Reply put in a record of
// their own, which a mutated file rarely reaches through base64), the
// daemon's restart reads it (loadRecords, leaseFromRecord) and computes its
// result and timers without a panic or a hang. Everything lives in
// t.TempDir().
func FuzzDHCPLease(f *testing.F) {
	ack, reply := fuzzLeasePackets(f)
	rec := &record{
		ClientID: "fuzz-container/fuzz/eth0", ContainerID: "fuzz-container", Network: "fuzz", IfName: "eth0",
		Netns: "/var/run/netns/cniforge-test-fuzz", CNIArgs: "IgnoreUnknown=1",
		Stdin: []byte(`{"cniVersion": "1.1.0", "name": "fuzz", "type": "macvlan", "ipam": {"type": "dhcp", "priority": 10}}`),
		V4:    &v4Rec{Offer: ack, ACK: ack, Acquired: time.Unix(1700000000, 0).UTC()},
		V6:    &v6Rec{Reply: reply, Acquired: time.Unix(1700000000, 0).UTC()},
	}
	file, err := json.Marshal(rec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(file, ack, reply)
	f.Add([]byte(`{"clientID": "x", "stdin": null}`), []byte(nil), []byte(nil))

	f.Fuzz(func(t *testing.T, file, ack, reply []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "lease.json"), file, 0o600); err != nil {
			t.Fatal(err)
		}
		var recs []*record
		testutil.Bounded(t, "loadRecords", func() { recs, _ = loadRecords(dir) })
		own := &record{ClientID: "own", Stdin: []byte(`{"cniVersion": "1.1.0", "name": "fuzz", "ipam": {"type": "dhcp"}}`),
			V4: &v4Rec{Offer: ack, ACK: ack}, V6: &v6Rec{Reply: reply}}
		if len(recs) > 0 {
			own.Stdin = recs[0].Stdin
		}
		d := &daemon{}
		for _, r := range append(recs, own) {
			testutil.Bounded(t, "resume lease", func() {
				l, err := leaseFromRecord(d, r)
				if err != nil {
					return
				}
				_ = l.result()
				_ = l.live(time.Now())
				_ = l.nextEvent()
				_ = l.nextDeadline()
			})
		}
	})
}

// fuzzLeasePackets returns a DHCPv4 ACK and a DHCPv6 Reply such as a
// server sends: address, mask, router, lease times and routes.
func fuzzLeasePackets(f *testing.F) (ack, reply []byte) {
	_, dst, _ := net.ParseCIDR("10.9.0.0/16")
	a, err := dhcpv4.New(
		dhcpv4.WithMessageType(dhcpv4.MessageTypeAck),
		dhcpv4.WithYourIP(net.ParseIP("10.1.0.7")),
		dhcpv4.WithNetmask(net.CIDRMask(24, 32)),
		dhcpv4.WithRouter(net.ParseIP("10.1.0.1")),
		dhcpv4.WithLeaseTime(3600),
		dhcpv4.WithOption(dhcpv4.OptClasslessStaticRoute(&dhcpv4.Route{Dest: dst, Router: net.ParseIP("10.1.0.254")})),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionStaticRoutingTable, []byte{10, 8, 0, 0, 10, 1, 0, 1})),
	)
	if err != nil {
		f.Fatal(err)
	}
	m, err := dhcpv6.NewMessage()
	if err != nil {
		f.Fatal(err)
	}
	m.MessageType = dhcpv6.MessageTypeReply
	m.AddOption(&dhcpv6.OptIANA{IaId: [4]byte{1, 2, 3, 4}, T1: time.Hour, T2: 2 * time.Hour,
		Options: dhcpv6.IdentityOptions{Options: []dhcpv6.Option{&dhcpv6.OptIAAddress{
			IPv6Addr: net.ParseIP("fd00::7"), PreferredLifetime: 3 * time.Hour, ValidLifetime: 4 * time.Hour}}}})
	return a.ToBytes(), m.ToBytes()
}
