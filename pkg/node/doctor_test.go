package node

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sysctl writes a sysctl of the node's host netns.
func (n *node) sysctl(key, value string) {
	n.t.Helper()
	must(n.t, n.hostNS.Do(func() error {
		return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644)
	}))
}

func (n *node) hostHas(path string) bool {
	var ok bool
	must(n.t, n.hostNS.Do(func() error {
		_, err := os.Stat(path)
		ok = err == nil
		return nil
	}))
	return ok
}

func (n *node) doctor() ([]finding, string, int) {
	n.t.Helper()
	out, rc := n.cli("doctor", "--json")
	var found []finding
	if err := json.Unmarshal([]byte(out), &found); err != nil {
		n.t.Fatalf("doctor --json (exit %d): %v:\n%s", rc, err, out)
	}
	text, _ := n.cli("doctor")
	return found, text, rc
}

// A node with everything doctor looks for wrong, made the way it happens:
// forwarding off, br_netfilter's hook off under a firewall network, a
// conflist naming a plugin that is not installed and one that fails
// VERSION, a range full of leaked reservations, CNI chains in both
// iptables backends. Each is found with its fix, and once fixed, gone.
func TestDoctorFindsWhatBreaksANode(t *testing.T) {
	// nodenet: bridge + host-local; its netns starts with ip_forward 0.
	n := newNode(t)
	must(t, os.MkdirAll(filepath.Join(n.cache, "results"), 0o755)) // a runtime ran here
	must(t, os.WriteFile(filepath.Join(n.conf, "30-fw.conflist"), []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"fwnet","plugins":[
		{"type":"bridge","bridge":"cfw0","ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.124.0.0/29","rangeStart":"10.124.0.2","rangeEnd":"10.124.0.3"}]]}},
		{"type":"firewall"}]}`, n.ipamData)), 0o644))
	broken := filepath.Join(n.conf, "40-broken.conflist")
	must(t, os.WriteFile(broken, []byte(`{"cniVersion":"1.0.0","name":"brokennet","plugins":[{"type":"nosuch"},{"type":"brokenplug"}]}`), 0o644))
	must(t, os.WriteFile(filepath.Join(n.bin, "brokenplug"), []byte("#!/bin/sh\necho garbage\nexit 1\n"), 0o755))
	for _, ip := range []string{"10.124.0.2", "10.124.0.3"} {
		must(t, os.MkdirAll(filepath.Join(n.ipamData, "fwnet"), 0o755))
		must(t, os.WriteFile(filepath.Join(n.ipamData, "fwnet", ip), []byte("ctr-leaked-"+ip+"\r\neth0"), 0o644))
	}
	brNF := n.hostHas("/proc/sys/net/bridge/bridge-nf-call-iptables")
	if brNF {
		n.sysctl("net/bridge/bridge-nf-call-iptables", "0")
	}
	n.inHost("iptables-legacy", "-t", "nat", "-N", "CNI-LEGACY-TEST")
	n.inHost("iptables-nft", "-t", "nat", "-N", "CNI-NFT-TEST")

	found, text, rc := n.doctor()
	t.Logf("cniforge doctor:\n%s", text)
	if rc != 1 {
		t.Errorf("doctor: exit %d, want 1", rc)
	}
	want := []struct{ network, problem, fix string }{
		{"nodenet", "net.ipv4.ip_forward is 0", "sysctl -w net.ipv4.ip_forward=1"},
		{"brokennet", `plugin "nosuch" is not in ` + n.bin, "cniforge install --dir " + n.bin},
		{"brokennet", `plugin "brokenplug": VERSION failed`, "answers VERSION"},
		{"fwnet", "no address free (2 used)", "2 reservation(s) no cached attachment owns and 0 attachment(s) whose netns is gone: cniforge gc --apply"},
		{"", "is empty while reservations exist", "a wrong --cache-dir makes every reservation look unowned"},
		{"", "IPv4 CNI chains in both iptables-legacy (nat/CNI-LEGACY-TEST) and iptables-nft (nat/CNI-NFT-TEST)", "keep one backend"},
	}
	if brNF {
		want = append(want, struct{ network, problem, fix string }{"fwnet", "net.bridge.bridge-nf-call-iptables is 0", "sysctl -w net.bridge.bridge-nf-call-iptables=1"})
	} else {
		want = append(want, struct{ network, problem, fix string }{"fwnet", "br_netfilter is not loaded", "modprobe br_netfilter"})
	}
	for _, w := range want {
		hit := false
		for _, f := range found {
			hit = hit || f.Network == w.network && strings.Contains(f.Problem, w.problem) && strings.Contains(f.Fix, w.fix)
		}
		if !hit {
			t.Errorf("doctor lacks %s: %q (fix %q):\n%s", w.network, w.problem, w.fix, text)
		}
	}
	if len(found) != len(want) {
		t.Errorf("doctor found %d things, want %d:\n%s", len(found), len(want), text)
	}

	// Fixed as the findings say.
	n.sysctl("net/ipv4/ip_forward", "1")
	if brNF {
		n.sysctl("net/bridge/bridge-nf-call-iptables", "1")
	} else {
		must(t, os.Remove(filepath.Join(n.conf, "30-fw.conflist")))
	}
	must(t, os.Remove(broken))
	n.inHost("iptables-legacy", "-t", "nat", "-X", "CNI-LEGACY-TEST")
	must(t, os.RemoveAll(filepath.Join(n.ipamData, "fwnet")))
	found, text, rc = n.doctor()
	if rc != 0 || len(found) != 0 || !strings.HasPrefix(text, "no findings") {
		t.Errorf("doctor on the fixed node: exit %d, %+v:\n%s", rc, found, text)
	}
}

func TestDoctorWithoutNetworks(t *testing.T) {
	n := newNode(t)
	must(t, os.MkdirAll(filepath.Join(n.cache, "results"), 0o755))
	ents, _ := os.ReadDir(n.conf)
	for _, e := range ents {
		must(t, os.Remove(filepath.Join(n.conf, e.Name())))
	}
	found, text, rc := n.doctor()
	if rc != 1 || len(found) != 1 || !strings.Contains(found[0].Problem, "no network config in "+n.conf) {
		t.Errorf("doctor with an empty conf dir: exit %d:\n%s", rc, text)
	}
}

// An install without cniforge-dhcp beside cniforge leaves an earlier
// install's cniforge-dhcp, and dhcp linked to it, at that install's
// version. doctor names the odd plugin and both versions; a whole install
// has no such finding.
func TestDoctorFindsPluginsOfAnotherVersion(t *testing.T) {
	n := newNode(t)
	versionFound := func() []finding {
		t.Helper()
		found, _, _ := n.doctor()
		var out []finding
		for _, f := range found {
			if strings.Contains(f.Problem, "cniforge plugins of") {
				out = append(out, f)
			}
		}
		return out
	}
	if f := versionFound(); len(f) != 0 {
		t.Fatalf("doctor on a whole install: %+v", f)
	}
	if target, err := os.Readlink(filepath.Join(n.bin, "dhcp")); err != nil || target != "cniforge-dhcp" {
		t.Fatalf("install linked dhcp to %q (%v), want cniforge-dhcp", target, err)
	}
	bridgeVersion := aboutVersion(filepath.Join(n.bin, "bridge"), "bridge")
	if bridgeVersion == "" || bridgeVersion == "v0.9.0" {
		t.Fatalf("bridge's about line gives version %q", bridgeVersion)
	}
	// The earlier install's cniforge-dhcp, as it answers a reader.
	old := "#!/bin/sh\necho 'CNI dhcp plugin v0.9.0 (cniforge): gets addresses from a DHCP server' >&2\n"
	must(t, os.WriteFile(filepath.Join(n.bin, "cniforge-dhcp"), []byte(old), 0o755))

	found := versionFound()
	if len(found) != 1 {
		t.Fatalf("doctor with an older cniforge-dhcp: %d version findings, want 1: %+v", len(found), found)
	}
	f := found[0]
	for _, want := range []string{"of 2 versions in " + n.bin, "; dhcp at v0.9.0;", " bridge ", " at " + bridgeVersion + ";"} {
		if !strings.Contains(f.Problem, want) {
			t.Errorf("problem %q lacks %q", f.Problem, want)
		}
	}
	if !strings.Contains(f.Fix, "cniforge install --dir "+n.bin+" with cniforge-light and cniforge-dhcp beside cniforge") {
		t.Errorf("fix %q", f.Fix)
	}
}
