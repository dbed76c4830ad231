package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// chainNode is a node whose network is a chain (bridge with masquerade,
// portmap, bandwidth), as Kubernetes nodes run them, on nftables.
func chainNode(t *testing.T) *node {
	n := newNode(t)
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"nodenet","plugins":[
		{"type":"bridge","bridge":"cnode0","isGateway":true,"ipMasq":true,"ipMasqBackend":"nftables",
		 "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.123.0.0/24"}]]}},
		{"type":"portmap","backend":"nftables","capabilities":{"portMappings":true}},
		{"type":"bandwidth","ingressRate":8000000,"ingressBurst":80000,"egressRate":8000000,"egressBurst":80000}]}`, n.ipamData)
	n.setConf(conf)
	return n
}

// addMapped attaches id with one host port, as a runtime would.
func (n *node) addMapped(id, netns string, hostPort int) {
	n.t.Helper()
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, n.cache, nil)
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: "eth0",
		CapabilityArgs: map[string]any{"portMappings": []map[string]any{{"hostPort": hostPort, "containerPort": 80, "protocol": "tcp"}}}}
	must(n.t, n.hostNS.Do(func() error {
		_, err := cni.AddNetworkList(context.Background(), n.list, rt)
		return err
	}))
}

func (n *node) check(args ...string) ([]checkLine, string, int) {
	n.t.Helper()
	out, rc := n.cli(append([]string{"check", "--json"}, args...)...)
	var lines []checkLine
	if err := json.Unmarshal([]byte(out), &lines); err != nil {
		n.t.Fatalf("check --json (exit %d): %v:\n%s", rc, err, out)
	}
	text, _ := n.cli(append([]string{"check"}, args...)...)
	return lines, text, rc
}

// inHost runs a command in the node's host netns, as an admin would.
func (n *node) inHost(name string, args ...string) {
	n.t.Helper()
	must(n.t, n.hostNS.Do(func() error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
		}
		return nil
	}))
}

// cniforge check reports, per cached attachment and per plugin, what an
// admin's `nft flush ruleset` took away; it uses the config cached with
// the attachment, not the conf dir's file of today; a leaked attachment
// (netns gone) is reported for gc, not checked.
func TestCheckReportsDriftPerPlugin(t *testing.T) {
	n := chainNode(t)
	a, _ := testutil.NewTestNS(t)
	b, _ := testutil.NewTestNS(t)
	n.addMapped("ctr-a", a.Path(), 18080)
	n.addMapped("ctr-b", b.Path(), 18081)

	lines, text, rc := n.check()
	t.Logf("cniforge check:\n%s", text)
	if rc != 0 || len(lines) != 2 {
		t.Fatalf("check on a fresh node: exit %d, %d lines:\n%s", rc, len(lines), text)
	}
	for _, l := range lines {
		if l.Status != checkOK || len(l.Problems) != 0 {
			t.Errorf("fresh attachment %s: %+v", l.ContainerID, l)
		}
	}
	if !strings.Contains(text, "nodenet  ctr-a      eth0    ok      -") {
		t.Errorf("check's table lacks ctr-a's ok line:\n%s", text)
	}

	// Today's conf dir no longer names portmap: the cached config still
	// does, and that is what the attachment was made with.
	conf, err := os.ReadFile(filepath.Join(n.conf, "10-nodenet.conflist"))
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(conf, &m))
	m["plugins"] = m["plugins"].([]any)[:1]
	edited, _ := json.Marshal(m)
	must(t, os.WriteFile(filepath.Join(n.conf, "10-nodenet.conflist"), edited, 0o644))

	// A careless admin.
	n.inHost("nft", "flush", "ruleset")

	lines, text, rc = n.check()
	t.Logf("cniforge check after nft flush ruleset:\n%s", text)
	if rc != 1 {
		t.Errorf("check after drift: exit %d, want 1", rc)
	}
	for _, l := range lines {
		plugins := map[string]bool{}
		for _, p := range l.Problems {
			plugins[p.Plugin] = true
		}
		if l.Status != checkDrift || !plugins["bridge"] || !plugins["portmap"] || plugins["bandwidth"] {
			t.Errorf("%s after the flush: %+v; want drift in bridge (masquerade) and portmap, bandwidth ok", l.ContainerID, l)
		}
	}
	if !strings.Contains(text, "ctr-b") || !strings.Contains(text, "drift   bridge: masquerade (nftables): ") || !strings.Contains(text, "; portmap: nftables port forwards") {
		t.Errorf("check's table does not name the drifted plugins:\n%s", text)
	}

	// --network filters; a leaked attachment is reported, not checked.
	if lines, _, _ := n.check("--network", "other"); len(lines) != 0 {
		t.Errorf("check --network other: %+v", lines)
	}
	c, rmC := testutil.NewTestNS(t)
	n.addMapped("ctr-c", c.Path(), 18082)
	must(t, rmC())
	lines, _, rc = n.check()
	var leaked *checkLine
	for i := range lines {
		if lines[i].ContainerID == "ctr-c" {
			leaked = &lines[i]
		}
	}
	if rc != 1 || leaked == nil || leaked.Status != checkLeaked || len(leaked.Problems) != 0 ||
		!strings.Contains(leaked.Reason, "cniforge gc") {
		t.Errorf("leaked attachment: exit %d, %+v", rc, leaked)
	}
}

// hostVeth is the host end of id's veth, from the result libcni cached.
func (n *node) hostVeth(id string) string {
	n.t.Helper()
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, n.cache, nil)
	r, err := cni.GetNetworkListCachedResult(n.list, &libcni.RuntimeConf{ContainerID: id, IfName: "eth0"})
	must(n.t, err)
	res, err := current.NewResultFromResult(r)
	must(n.t, err)
	for _, i := range res.Interfaces {
		if i.Sandbox == "" && i.Mac != "" && i.Name != "cnode0" {
			return i.Name
		}
	}
	n.t.Fatalf("no host veth in %s's cached result: %+v", id, res.Interfaces)
	return ""
}

// dialHostPort connects from the host netns to the bridge's address on
// port, as a client on the node would reach a published port.
func (n *node) dialHostPort(port int) error {
	return dialHello(n.hostNS, fmt.Sprintf("10.123.0.1:%d", port))
}

// dialHello connects from inside from to addr and reads serve's "hello".
func dialHello(from *ns.NetNS, addr string) error {
	return from.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != "hello" {
			return fmt.Errorf("read %q", buf)
		}
		return nil
	})
}

// serve answers "hello" on port 80 inside ctr until the test ends.
func serve(t *testing.T, ctr *ns.NetNS) { t.Helper(); serveAt(t, ctr, ":80") }

// listenIn listens on addr (tcp) inside n until the test ends.
func listenIn(t *testing.T, n *ns.NetNS, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	must(t, n.Do(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	}))
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// acceptIn listens on addr (tcp) inside n and hands each connection to
// handle, until the test ends.
func acceptIn(t *testing.T, n *ns.NetNS, addr string, handle func(net.Conn)) {
	t.Helper()
	l := listenIn(t, n, addr)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
}

// serveAt answers "hello" on addr inside n until the test ends.
func serveAt(t *testing.T, n *ns.NetNS, addr string) {
	t.Helper()
	acceptIn(t, n, addr, func(c net.Conn) {
		_, _ = c.Write([]byte("hello"))
		_ = c.Close()
	})
}

// What a user's drift takes away (nft flush ruleset, a deleted qdisc),
// check --repair puts back without touching the container: the published
// port answers again and a second check passes. What it cannot repair (an
// address gone from the container) it says so, and exits 1.
func TestCheckRepairRestoresRulesAndQdiscs(t *testing.T) {
	n := chainNode(t)
	a, _ := testutil.NewTestNS(t)
	n.addMapped("ctr-a", a.Path(), 18080)
	serve(t, a)
	if err := n.dialHostPort(18080); err != nil {
		t.Fatalf("published port before any drift: %v", err)
	}

	n.inHost("nft", "flush", "ruleset")
	veth := n.hostVeth("ctr-a")
	n.inHost("tc", "qdisc", "del", "dev", veth, "root")
	if err := n.dialHostPort(18080); err == nil {
		t.Fatal("the published port still answers after nft flush ruleset: the test cannot see the repair")
	}

	lines, text, rc := n.check()
	if rc != 1 || len(lines) != 1 || len(lines[0].Problems) != 3 {
		t.Fatalf("check after drift: exit %d:\n%s", rc, text)
	}
	out, rc := n.cli("check", "--repair")
	t.Logf("cniforge check --repair:\n%s", out)
	if rc != 0 || !strings.Contains(out, "ctr-a      eth0    repaired") {
		t.Errorf("check --repair: exit %d:\n%s", rc, out)
	}
	for _, p := range []string{"bridge: ", "portmap: ", "bandwidth: "} {
		if !strings.Contains(out, p) {
			t.Errorf("check --repair does not name %s:\n%s", p, out)
		}
	}
	if err := n.dialHostPort(18080); err != nil {
		t.Errorf("published port after check --repair: %v", err)
	}
	if lines, text, rc := n.check(); rc != 0 || lines[0].Status != checkOK {
		t.Errorf("check after check --repair: exit %d:\n%s", rc, text)
	}

	// An address gone from the container is no rule: check --repair says
	// it cannot repair it.
	must(t, a.Do(func() error {
		return exec.Command("ip", "addr", "flush", "dev", "eth0").Run()
	}))
	out, rc = n.cli("check", "--repair")
	if rc != 1 || !strings.Contains(out, "drift") || !strings.Contains(out, "CHECK still fails") {
		t.Errorf("check --repair of a container's lost address: exit %d:\n%s", rc, out)
	}
}

// A chain with firewall (iptables) and sbr: CNI-FORWARD flushed on the
// host and sbr's rule gone from the container are reported per plugin,
// check --repair puts both back (the container reaches its gateway again
// through sbr's table), and a second check passes.
func TestCheckRepairFirewallAndSbr(t *testing.T) {
	n := newNode(t)
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"nodenet","plugins":[
		{"type":"bridge","bridge":"cnode0","isGateway":true,"ipMasq":true,"ipMasqBackend":"iptables",
		 "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.123.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},
		{"type":"firewall","backend":"iptables"},
		{"type":"sbr"}]}`, n.ipamData)
	n.setConf(conf)
	a, _ := testutil.NewTestNS(t)
	ip := n.add("ctr-a", a)
	ping := func() error {
		return a.Do(func() error {
			out, err := exec.Command("ping", "-c1", "-W2", "-I", ip, "10.123.0.1").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})
	}
	if err := ping(); err != nil {
		t.Fatalf("ping the gateway before any drift: %v", err)
	}
	if lines, text, rc := n.check(); rc != 0 || lines[0].Status != checkOK {
		t.Fatalf("check on a fresh node: exit %d:\n%s", rc, text)
	}

	n.inHost("iptables", "-t", "filter", "-F", "CNI-FORWARD")
	h, err := a.Handle()
	must(t, err)
	defer h.Close()
	rules, err := h.RuleList(netlink.FAMILY_V4)
	must(t, err)
	deleted := 0
	for _, r := range rules {
		if r.Src != nil && r.Src.IP.String() == ip {
			must(t, h.RuleDel(&r))
			deleted++
		}
	}
	if deleted == 0 {
		t.Fatalf("no sbr rule from %s in the container: %+v", ip, rules)
	}
	if err := ping(); err == nil {
		t.Fatal("the container still reaches its gateway without sbr's rule: the test cannot see the repair")
	}

	lines, text, rc := n.check()
	t.Logf("cniforge check after the drift:\n%s", text)
	plugins := map[string]bool{}
	for _, p := range lines[0].Problems {
		plugins[p.Plugin] = true
	}
	if rc != 1 || !plugins["firewall"] || !plugins["sbr"] {
		t.Fatalf("check after the drift: exit %d, want firewall and sbr named:\n%s", rc, text)
	}
	out, rc := n.cli("check", "--repair")
	t.Logf("cniforge check --repair:\n%s", out)
	if rc != 0 || !strings.Contains(out, "ctr-a      eth0    repaired") {
		t.Errorf("check --repair: exit %d:\n%s", rc, out)
	}
	if err := ping(); err != nil {
		t.Errorf("ping the gateway after check --repair: %v", err)
	}
	if lines, text, rc := n.check(); rc != 0 || lines[0].Status != checkOK {
		t.Errorf("check after check --repair: exit %d:\n%s", rc, text)
	}

	// sbr drifts with its rule still there: a route gone from its table.
	// Repair makes up no route (CHECK still fails) and adds no second
	// rule from the address, however often it runs.
	fromIP := func() []netlink.Rule {
		t.Helper()
		rules, err := h.RuleList(netlink.FAMILY_V4)
		must(t, err)
		var out []netlink.Rule
		for _, r := range rules {
			if r.Src != nil && r.Src.IP.String() == ip {
				out = append(out, r)
			}
		}
		return out
	}
	own := fromIP()
	if len(own) != 1 {
		t.Fatalf("rules from %s after the repair: %+v, want sbr's one", ip, own)
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: own[0].Table}, netlink.RT_FILTER_TABLE)
	must(t, err)
	removed := false
	for _, r := range routes {
		if r.Dst != nil && r.Dst.String() == "10.123.0.0/24" {
			must(t, h.RouteDel(&r))
			removed = true
		}
	}
	if !removed {
		t.Fatalf("no route to 10.123.0.0/24 in sbr's table %d: %+v", own[0].Table, routes)
	}
	for range 2 {
		out, rc = n.cli("check", "--repair")
		if rc != 1 || !strings.Contains(out, "sbr: ") {
			t.Errorf("check --repair with a route gone from sbr's table: exit %d, want 1 naming sbr:\n%s", rc, out)
		}
	}
	t.Logf("cniforge check --repair, a route gone from sbr's table:\n%s", out)
	if got := fromIP(); len(got) != 1 {
		t.Errorf("rules from %s after two repairs of sbr: %d, want 1: %+v", ip, len(got), got)
	}
}

// A chain whose firewall uses firewalld (the container's address a source
// of the trusted zone, runtime configuration only): `firewall-cmd
// --reload` drops the source, and the node's firewalld then rejects what
// the container sends to the host. check names the firewall plugin,
// check --repair (firewall's DEL then ADD) puts the source back, the
// container reaches the host again, and a second check passes. Both with
// "backend": "firewalld" and with "" (Podman's conflist: firewalld when
// it answers).
func TestCheckRepairFirewalldReload(t *testing.T) {
	t.Run("firewalld", func(t *testing.T) { checkRepairFirewalldReload(t, "firewalld") })
	t.Run("empty_as_Podman_sends", func(t *testing.T) { checkRepairFirewalldReload(t, "") })
}

func checkRepairFirewalldReload(t *testing.T, backend string) {
	n := newNode(t)
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "firewalld.log"))
	must(t, err)
	bus, stop, err := testutil.RunFirewalld(n.hostNS, dir, log)
	must(t, err)
	t.Cleanup(func() {
		stop()
		_ = log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			var keep []string
			for _, line := range strings.Split(string(out), "\n") {
				// The private bus has no polkit: firewalld asks for it on
				// every call, and serves root without it.
				if !strings.Contains(line, "org.freedesktop.PolicyKit1") {
					keep = append(keep, line)
				}
			}
			t.Logf("firewalld's output (polkit's activation lines left out):\n%s", strings.Join(keep, "\n"))
		}
	})
	// libcni, and cniforge check with the plugins it runs, inherit it.
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus)

	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"nodenet","plugins":[
		{"type":"bridge","bridge":"cnode0","isGateway":true,"ipMasq":true,"ipMasqBackend":"nftables",
		 "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.123.0.0/24"}]]}},
		{"type":"firewall","backend":%q}]}`, n.ipamData, backend)
	n.setConf(conf)
	a, _ := testutil.NewTestNS(t)
	ip := n.add("ctr-a", a)
	trusted := func() string {
		t.Helper()
		out, err := testutil.FirewallCmd(bus, "--zone=trusted", "--list-sources")
		must(t, err)
		return out
	}
	if got := trusted(); got != ip {
		t.Fatalf("trusted zone's sources after ADD: %q, want %q", got, ip)
	}

	// A service on the host's bridge address, outside every zone's
	// services: only the trusted zone lets the container reach it.
	serveAt(t, n.hostNS, "10.123.0.1:18090")
	dialHost := func() error { return dialHello(a, "10.123.0.1:18090") }
	if err := dialHost(); err != nil {
		t.Fatalf("container to host before the reload: %v", err)
	}
	if lines, text, rc := n.check(); rc != 0 || lines[0].Status != checkOK {
		t.Fatalf("check on a fresh node: exit %d:\n%s", rc, text)
	}

	if _, err := testutil.FirewallCmd(bus, "--reload"); err != nil {
		t.Fatal(err)
	}
	if got := trusted(); got != "" {
		t.Fatalf("trusted zone's sources after firewall-cmd --reload: %q, want none", got)
	}
	if err := dialHost(); err == nil {
		t.Fatal("the container still reaches the host after the reload: the test cannot see the repair")
	}

	lines, text, rc := n.check()
	t.Logf("cniforge check after firewall-cmd --reload:\n%s", text)
	var fw *checkProblem
	for i, p := range lines[0].Problems {
		if p.Plugin == "firewall" {
			fw = &lines[0].Problems[i]
		}
	}
	if rc != 1 || lines[0].Status != checkDrift || fw == nil || !strings.Contains(fw.Error, "source "+ip+" is in no zone") {
		t.Fatalf("check after the reload: exit %d, want drift naming firewall and %s:\n%s", rc, ip, text)
	}
	out, rc := n.cli("check", "--repair")
	t.Logf("cniforge check --repair:\n%s", out)
	if rc != 0 || !strings.Contains(out, "ctr-a      eth0    repaired") || !strings.Contains(out, "firewall: ") {
		t.Errorf("check --repair: exit %d:\n%s", rc, out)
	}
	if got := trusted(); got != ip {
		t.Errorf("trusted zone's sources after check --repair: %q, want %q", got, ip)
	}
	if err := dialHost(); err != nil {
		t.Errorf("container to host after check --repair: %v", err)
	}
	if lines, text, rc := n.check(); rc != 0 || lines[0].Status != checkOK {
		t.Errorf("check after check --repair: exit %d:\n%s", rc, text)
	}
}

// The addresses masquerade repair installs rules for are the container
// interface's: never one the result gives a host-side interface (the
// bridge's gateway, a host end), nor another container interface's.
func TestRepairMasqueradesOnlyContainerAddresses(t *testing.T) {
	idx := func(i int) *int { return &i }
	res := &current.Result{
		Interfaces: []*current.Interface{
			{Name: "cnode0"},                          // the bridge, on the host
			{Name: "veth1234"},                        // the host end
			{Name: "eth0", Sandbox: "/run/netns/pod"}, // the container's
			{Name: "net1", Sandbox: "/run/netns/pod"}, // another of the pod's
			{Name: "eth0"},                            // a host-side link named like it
		},
	}
	for _, a := range []struct {
		cidr  string
		iface *int
	}{
		{"10.123.0.1/24", idx(0)}, {"10.9.0.1/32", idx(1)}, {"10.123.0.2/24", idx(2)},
		{"10.124.0.2/24", idx(3)}, {"10.125.0.1/24", idx(4)}, {"10.126.0.2/24", nil}, {"10.127.0.2/24", idx(7)},
	} {
		ip, ipn, err := net.ParseCIDR(a.cidr)
		must(t, err)
		ipn.IP = ip
		res.IPs = append(res.IPs, &current.IPConfig{Address: *ipn, Interface: a.iface})
	}
	var got []string
	for _, a := range containerAddrs(res, "eth0") {
		got = append(got, a.String())
	}
	// eth0's, and those no interface (or an index out of range) claims.
	if want := "[10.123.0.2/24 10.126.0.2/24 10.127.0.2/24]"; fmt.Sprint(got) != want {
		t.Errorf("containerAddrs(eth0) = %v, want %s", got, want)
	}
}

// An attachment whose netns cannot be decided (its path a plain file: a
// mount this namespace does not see) is reported as an error, and no
// plugin's CHECK (nor, with --repair, any repair) runs against it.
func TestCheckSkipsAnUndecidableNetns(t *testing.T) {
	n := chainNode(t)
	a, _ := testutil.NewTestNS(t)
	n.addMapped("ctr-a", a.Path(), 18080)
	plain := filepath.Join(t.TempDir(), "netns")
	must(t, os.WriteFile(plain, nil, 0o444))
	path := filepath.Join(n.cache, "results", "nodenet-ctr-a-eth0")
	b, err := os.ReadFile(path)
	must(t, err)
	var entry map[string]any
	must(t, json.Unmarshal(b, &entry))
	entry["netns"] = plain
	b, err = json.Marshal(entry)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o600))
	n.inHost("nft", "flush", "ruleset") // drift a CHECK would see
	before := n.snapshot()
	for _, args := range [][]string{nil, {"--repair"}} {
		lines, text, rc := n.check(args...)
		t.Logf("cniforge check %v:\n%s", args, text)
		if rc != 1 || len(lines) != 1 || lines[0].Status != checkError || len(lines[0].Problems) != 0 ||
			!strings.Contains(lines[0].Reason, "netns undecidable: a file that is not a namespace mount") {
			t.Errorf("check %v of an undecidable netns: exit %d: %+v", args, rc, lines)
		}
	}
	if after := n.snapshot(); after != before {
		t.Errorf("check --repair of an undecidable netns changed the node:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// check --repair of a bridge attachment whose config leaves destinations
// unmasqueraded (ipMasqExcludeCIDRs) installs the exclusions again with
// the masquerade: a repair that forgot them would turn pod-to-pod traffic
// to other nodes into NAT, and the CHECK after it would report drift.
func TestRepairKeepsMasqueradeExclusions(t *testing.T) {
	for _, backend := range []string{"iptables", "nftables"} {
		t.Run(backend, func(t *testing.T) {
			n := newNode(t)
			n.setConf(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"nodenet","plugins":[
				{"type":"bridge","bridge":"cnode0","isGateway":true,"ipMasq":true,"ipMasqBackend":%q,
				 "ipMasqExcludeCIDRs":["10.99.0.0/16"],
				 "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.123.0.0/24"}]]}}]}`, backend, n.ipamData))
			a, _ := testutil.NewTestNS(t)
			n.add("ctr-a", a)
			if lines, text, rc := n.check(); rc != 0 || lines[0].Status != checkOK {
				t.Fatalf("check on a fresh node: exit %d:\n%s", rc, text)
			}
			if backend == "nftables" {
				n.inHost("nft", "flush", "ruleset")
			} else {
				n.inHost("iptables", "-t", "nat", "-F")
			}
			if lines, text, rc := n.check(); rc != 1 || lines[0].Status != checkDrift {
				t.Fatalf("check after the flush: exit %d, want drift:\n%s", rc, text)
			}
			out, rc := n.cli("check", "--repair")
			t.Logf("cniforge check --repair:\n%s", out)
			if rc != 0 || !strings.Contains(out, "repaired") {
				t.Errorf("check --repair: exit %d:\n%s", rc, out)
			}
			if lines, text, rc := n.check(); rc != 0 || lines[0].Status != checkOK {
				t.Errorf("check after check --repair (the exclusions must be back): exit %d:\n%s", rc, text)
			}
		})
	}
}
