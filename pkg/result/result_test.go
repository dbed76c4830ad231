package result

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

func TestCodes(t *testing.T) {
	base := errors.New("boom")
	cases := []struct {
		name string
		err  error
		want uint
	}{
		{"invalid config", InvalidConfig(base), types.ErrInvalidNetworkConfig},
		{"decoding", Decoding(base), types.ErrDecodingFailure},
		{"netns", InvalidNetNS(base), types.ErrInvalidNetNS},
		{"env", InvalidEnv(base), types.ErrInvalidEnvironmentVariables},
		{"io", IOFailure(base), types.ErrIOFailure},
		{"try again", TryAgainLater(base), types.ErrTryAgainLater},
		{"unavailable", Unavailable(base), CodeUnavailable},
		{"plain", base, types.ErrInternal},
		{"keeps the inner code", InvalidConfig(fmt.Errorf("wrapped: %w", TryAgainLater(base))), types.ErrTryAgainLater},
	}
	for _, c := range cases {
		if got := Code(c.err); got != c.want {
			t.Errorf("%s: code %d, want %d", c.name, got, c.want)
		}
	}
	if InvalidConfig(nil) != nil {
		t.Error("InvalidConfig(nil) must stay nil")
	}
}

func TestPrevResult(t *testing.T) {
	stdin := []byte(`{"cniVersion": "0.4.0", "name": "n", "type": "t",
		"prevResult": {"cniVersion": "0.4.0",
			"interfaces": [{"name": "eth0", "sandbox": "/ns"}],
			"ips": [{"version": "4", "address": "10.0.0.2/24", "gateway": "10.0.0.1", "interface": 0}]}}`)
	prev, err := PrevResult(stdin)
	if err != nil {
		t.Fatal(err)
	}
	if prev.CNIVersion != current.ImplementedSpecVersion {
		t.Errorf("version %q, want converted to %q", prev.CNIVersion, current.ImplementedSpecVersion)
	}
	if idx := InterfaceIndex(prev, "eth0", "/ns"); idx != 0 {
		t.Errorf("InterfaceIndex = %d", idx)
	}
	if idx := InterfaceIndex(prev, "eth0", ""); idx != -1 {
		t.Errorf("host lookup of a sandbox iface = %d, want -1", idx)
	}
	if ips := IPsOf(prev, 0); len(ips) != 1 || ips[0].Address.String() != "10.0.0.2/24" {
		t.Errorf("IPsOf = %v", ips)
	}

	none, err := PrevResult([]byte(`{"cniVersion": "1.0.0", "name": "n"}`))
	if err != nil || none != nil {
		t.Errorf("no prevResult: %v, %v", none, err)
	}
	if _, err := PrevResult([]byte(`{`)); Code(err) != types.ErrDecodingFailure {
		t.Errorf("malformed: %v", err)
	}
}

func mustCIDR(s string) net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return *n
}

func TestCheckAddrs(t *testing.T) {
	want := []*current.IPConfig{{Address: mustCIDR("10.0.0.2/24")}, {Address: mustCIDR("fd00::2/64")}}
	have := []net.IPNet{mustCIDR("fd00::2/64"), mustCIDR("10.0.0.2/24"), mustCIDR("127.0.0.1/8")}
	if err := CheckAddrs("eth0", want, have); err != nil {
		t.Errorf("all present: %v", err)
	}
	err := CheckAddrs("eth0", want, []net.IPNet{mustCIDR("10.0.0.2/16"), mustCIDR("fd00::2/64")})
	if err == nil || err.Error() != `"eth0" lacks address 10.0.0.2/24` {
		t.Errorf("wrong prefix: %v", err)
	}
}

func TestCheckRoutes(t *testing.T) {
	def := mustCIDR("0.0.0.0/0")
	want := []*types.Route{{Dst: def, GW: net.ParseIP("10.0.0.1")}, {Dst: mustCIDR("192.168.0.0/16")}}
	have := []Route{{Dst: mustCIDR("192.168.0.0/16"), GW: net.ParseIP("10.0.0.9")}, {Dst: def, GW: net.ParseIP("10.0.0.1")}}
	if err := CheckRoutes("eth0", want, have); err != nil {
		t.Errorf("all present: %v", err)
	}
	have[1].GW = net.ParseIP("10.0.0.254")
	err := CheckRoutes("eth0", want, have)
	if err == nil || err.Error() != `"eth0" lacks route 0.0.0.0/0 via 10.0.0.1` {
		t.Errorf("wrong gateway: %v", err)
	}
}

func TestFlattenKeepsContext(t *testing.T) {
	inner := types.NewError(types.ErrInvalidNetNS, "bad netns", "")
	err := Flatten(errors.Join(errors.New("other failure"), fmt.Errorf("open: %w", inner)))
	te, ok := err.(*types.Error)
	if !ok || te.Code != types.ErrInvalidNetNS {
		t.Fatalf("Flatten = %#v", err)
	}
	for _, want := range []string{"bad netns", "other failure", "open: "} {
		if !strings.Contains(te.Msg, want) {
			t.Errorf("message %q lacks %q", te.Msg, want)
		}
	}
	if Flatten(inner) != error(inner) {
		t.Error("a bare CNI error must pass through unchanged")
	}
	plain := errors.New("plain")
	if Flatten(plain) != plain || Flatten(nil) != nil {
		t.Error("uncoded errors and nil pass through")
	}
}

func TestGCAttachments(t *testing.T) {
	list, err := GCAttachments([]byte(`{"name": "n", "cni.dev/valid-attachments": [{"containerID": "a", "ifname": "eth0"}]}`))
	if err != nil || len(list) != 1 || list[0].ContainerID != "a" || list[0].IfName != "eth0" {
		t.Errorf("listed: %v, %v", list, err)
	}
	for _, none := range []string{`{"cni.dev/valid-attachments": null}`, `{"cni.dev/valid-attachments": []}`} {
		if list, err := GCAttachments([]byte(none)); err != nil || len(list) != 0 {
			t.Errorf("%s: %v, %v", none, list, err)
		}
	}
	if list, err := GCAttachments([]byte(`{"cni.dev/attachments": [{"containerID": "b", "ifname": "eth1"}]}`)); err != nil || len(list) != 1 {
		t.Errorf("the draft key: %v, %v", list, err)
	}
	// An absent key means what null and [] mean: libcni's GC with no list
	// (cnitool gc) has already run DEL for every cached attachment.
	if list, err := GCAttachments([]byte(`{"name": "n"}`)); err != nil || list != nil {
		t.Errorf("absent: %v, %v", list, err)
	}
	_, err = GCAttachments([]byte(`{"cni.dev/valid-attachments": "a"}`))
	if Code(err) != types.ErrInvalidNetworkConfig || !strings.HasPrefix(err.Error(), "cni.dev/valid-attachments: want") {
		t.Errorf("wrong type: %v", err)
	}
	// A malformed entry is refused naming the key and its index, never read
	// as an empty list (which would release the attachment it meant to keep).
	for _, bad := range []struct{ stdin, want string }{
		{`{"cni.dev/valid-attachments": [null]}`, "cni.dev/valid-attachments[0]: "},
		{`{"cni.dev/valid-attachments": [{}]}`, `cni.dev/valid-attachments[0]: "containerID": missing`},
		{`{"cni.dev/valid-attachments": [{"containerID": "a", "ifname": "eth0"}, {"containerID": "b"}]}`, `cni.dev/valid-attachments[1]: "ifname": missing`},
		{`{"cni.dev/valid-attachments": [{"containerID": 5, "ifname": "eth0"}]}`, `cni.dev/valid-attachments[0]: "containerID": 5 is not`},
		{`{"cni.dev/valid-attachments": [{"containerID": "", "ifname": "eth0"}]}`, `cni.dev/valid-attachments[0]: "containerID": "" is not`},
		{`{"cni.dev/valid-attachments": ["a"]}`, `cni.dev/valid-attachments[0]: "a": want an object`},
		{`{"cni.dev/attachments": [null]}`, "cni.dev/attachments[0]: "},
	} {
		list, err := GCAttachments([]byte(bad.stdin))
		if Code(err) != types.ErrInvalidNetworkConfig || !strings.HasPrefix(err.Error(), bad.want) {
			t.Errorf("%s: got %v, %v; want code 7 starting %q", bad.stdin, list, err, bad.want)
		}
	}
	if _, err := GCAttachments([]byte(`{`)); Code(err) != types.ErrDecodingFailure {
		t.Errorf("malformed: %v", err)
	}
}

// A delegate that exits non-zero with only stderr gives invoke's error
// code 0, which must reach the runtime as 999 with the stderr kept.
func TestFlattenCodeZeroIs999(t *testing.T) {
	zero := &types.Error{Msg: `netplugin failed: "boom\n"`}
	for _, err := range []error{zero, fmt.Errorf("ipam fake ADD: %w", zero)} {
		got, ok := Flatten(err).(*types.Error)
		if !ok || got.Code != types.ErrInternal || !strings.Contains(got.Msg, "boom") {
			t.Errorf("Flatten(%v) = %#v, want code 999 keeping the message", err, got)
		}
	}
}
