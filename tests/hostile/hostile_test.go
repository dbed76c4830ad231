package hostile_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// env is what a target's base config refers to.
type env struct {
	root     string // every folder a config names is under it
	dataDir  string // host-local's
	tuning   string // tuning's
	sock     string // dhcp's daemon socket (no daemon: config is refused first)
	contPath string
}

// target is one plugin binary with a valid base config; its cases are made
// from the base config by mutations, plus the common ones.
type target struct {
	name    string
	bin     string // the binary, when not name
	chained bool   // has a prevResult; CNI_IFNAME is eth0, which exists
	// prevMaster: the prevResult's single interface is the master of the
	// link to make (ipvlan chained), not the interface to adjust.
	prevMaster bool
	ipam       bool // an IPAM plugin, exec'd directly: its ipam keys are its own
	conf       func(e env) string
	// accepted are mutations (by mutation.String) that are valid configs
	// and so are not run: each says why.
	accepted map[string]string
	// extra are hand-written cases for what a walk of the keys cannot
	// make (keys that are paths, CNI_ARGS).
	extra func(e env) []hcase
}

// hcase is one hostile call and what must come of it.
type hcase struct {
	name        string
	verb        string
	stdin       []byte
	ifName      string // "" = the target's
	containerID string // "" = "hostile"
	args        string // CNI_ARGS
	codes       []uint
	mention     []string // the message or details names one of these
	delMayPass  bool     // DEL may succeed (it changed nothing)
}

const (
	hostLocalIPAM = `{"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.61.0.0/24", "rangeStart": "10.61.0.10", "rangeEnd": "10.61.0.100", "gateway": "10.61.0.1"}]], "routes": [{"dst": "0.0.0.0/0", "gw": "10.61.0.1"}]}`
	// prevResultT is what a bridge before a chained plugin reported, its
	// container end (eth0, which the test makes) at index 1.
	prevResultT = `{"cniVersion": "1.1.0", "interfaces": [{"name": "hveth0"}, {"name": "eth0", "sandbox": %q}], "ips": [{"address": "10.70.0.2/24", "gateway": "10.70.0.1", "interface": 1}], "routes": [{"dst": "0.0.0.0/0", "gw": "10.70.0.1"}], "dns": {"nameservers": ["10.70.0.1"]}}`
)

func hl(e env) string   { return fmt.Sprintf(hostLocalIPAM, e.dataDir) }
func prev(e env) string { return fmt.Sprintf(prevResultT, e.contPath) }

// main is a base config of an interface-making plugin: type t, keys, ipam.
func mainConf(t, keys string) func(e env) string {
	if keys != "" {
		keys += ", "
	}
	return func(e env) string {
		return fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "hostile", "type": %q, %s"ipam": %s}`, t, keys, hl(e))
	}
}

// chainedConf is a base config of a chained plugin: type t, keys, prevResult.
func chainedConf(t, keys string) func(e env) string {
	if keys != "" {
		keys += ", "
	}
	return func(e env) string {
		return fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "hostile", "type": %q, %s"prevResult": %s}`, t, keys, prev(e))
	}
}

func targets() []target {
	return []target{
		{name: "loopback", conf: func(env) string { return `{"cniVersion": "1.1.0", "name": "hostile", "type": "loopback"}` }},
		{name: "bridge", accepted: map[string]string{
			"bridge = range: empty":             `the default bridge, cni0`,
			"vlanTrunk = range: empty":          `no trunk`,
			"ipMasqExcludeCIDRs = range: empty": `every destination outside the subnet masqueraded`,
		}, conf: mainConf("bridge", `"bridge": "hostilebr0", "isGateway": true, "isDefaultGateway": false, "forceAddress": false, "mtu": 1400, "hairpinMode": false, "promiscMode": false, "vlan": 10, "vlanTrunk": [{"id": 20}, {"minID": 30, "maxID": 40}], "preserveDefaultVlan": true, "macspoofchk": false, "enabledad": false, "disableContainerInterface": false, "portIsolation": false, "ipMasq": true, "ipMasqBackend": "iptables", "ipMasqExcludeCIDRs": ["10.88.0.0/16"]`)},
		{name: "ptp", accepted: map[string]string{
			"ipMasqExcludeCIDRs = range: empty": `every destination outside the subnet masqueraded`,
		}, conf: mainConf("ptp", `"mtu": 1400, "ipMasq": true, "ipMasqBackend": "iptables", "ipMasqExcludeCIDRs": ["10.88.0.0/16"]`)},
		{name: "macvlan", accepted: map[string]string{
			"mac = range: empty":  `a random MAC`,
			"mode = range: empty": `the default mode, bridge`,
		}, conf: mainConf("macvlan", `"master": "hostile0", "mode": "bridge", "mtu": 1400, "mac": "02:00:00:00:00:01", "bcqueuelen": 100, "linkInContainer": false`)},
		{name: "ipvlan", accepted: map[string]string{
			"mode = range: empty": `the default mode, l2`,
		}, conf: mainConf("ipvlan", `"master": "hostile0", "mode": "l2", "mtu": 1400, "linkInContainer": false`)},
		{name: "ipvlan-chained", bin: "ipvlan", prevMaster: true, accepted: map[string]string{
			"mode = range: empty": `the default mode, l2`,
		}, conf: func(env) string {
			return `{"cniVersion": "1.1.0", "name": "hostile", "type": "ipvlan", "mode": "l2", "prevResult": {"cniVersion": "1.1.0", "interfaces": [{"name": "hostile0"}], "ips": [{"address": "10.70.0.5/24", "gateway": "10.70.0.1", "interface": 0}]}}`
		}},
		{name: "vlan", conf: mainConf("vlan", `"master": "hostile0", "vlanId": 100, "mtu": 1400, "linkInContainer": false`)},
		{name: "dummy", conf: mainConf("dummy", "")},
		{name: "host-device", conf: mainConf("host-device", `"device": "hostile1"`), extra: hostDeviceCases},
		{name: "tap", accepted: map[string]string{
			"mac = range: empty":            `a random MAC`,
			"selinuxContext = range: empty": `no label`,
		}, conf: mainConf("tap", `"mac": "02:00:00:00:00:02", "mtu": 1400, "multiQueue": false, "owner": 0, "group": 0, "selinuxContext": "system_u:system_r:container_t:s0"`)},
		{name: "host-local", ipam: true, accepted: map[string]string{
			// Not run: it would write below the real /var/lib/cni.
			"ipam.dataDir = range: empty":                 `upstream's default, /var/lib/cni/networks`,
			"ipam.ranges[0][0].gateway = range: empty":    `the default gateway, the subnet's first address`,
			"ipam.ranges[0][0].rangeStart = range: empty": `the subnet's first usable address`,
			"ipam.ranges[0][0].rangeEnd = range: empty":   `the subnet's last usable address`,
			"ipam.resolvConf = range: empty":              `no DNS from a file`,
			"ipam.routes = range: empty":                  `no routes`,
			"ipam.routes[0].gw = range: empty":            `a route through the range's gateway`,
			"runtimeConfig.ips = range: empty":            `no address asked for`,
		}, extra: hostLocalCases, conf: func(e env) string {
			return fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "hostile", "type": "ptp", "ipam": {"type": "host-local", "dataDir": %q, "resolvConf": "/etc/resolv.conf", "ranges": [[{"subnet": "10.61.0.0/24", "rangeStart": "10.61.0.10", "rangeEnd": "10.61.0.100", "gateway": "10.61.0.1"}]], "routes": [{"dst": "0.0.0.0/0", "gw": "10.61.0.1"}]}, "runtimeConfig": {"ips": ["10.61.0.20/24"]}}`, e.dataDir)
		}},
		{name: "static", ipam: true, accepted: map[string]string{
			"ipam.addresses = range: empty":            `no addresses: a result with routes and DNS only (spec 1.x)`,
			"ipam.addresses[0].gateway = range: empty": `an address without gateway`,
			"ipam.dns.domain = range: empty":           `free text, passed on`,
			"ipam.dns.domain = range: overlong":        `free text, passed on`,
			"ipam.dns.domain = range: path escape":     `free text, passed on`,
			"ipam.dns.nameservers = range: empty":      `no name servers`,
			"ipam.dns.options = range: empty":          `free text, passed on`,
			"ipam.dns.options = range: null element":   `free text, passed on (null is "")`,
			"ipam.dns.options[0] = range: empty":       `free text, passed on`,
			"ipam.dns.options[0] = range: overlong":    `free text, passed on`,
			"ipam.dns.options[0] = range: path escape": `free text, passed on`,
			"ipam.dns.search = range: empty":           `free text, passed on`,
			"ipam.dns.search = range: null element":    `free text, passed on (null is "")`,
			"ipam.dns.search[0] = range: empty":        `free text, passed on`,
			"ipam.dns.search[0] = range: overlong":     `free text, passed on`,
			"ipam.dns.search[0] = range: path escape":  `free text, passed on`,
			"ipam.routes = range: empty":               `no routes`,
			"ipam.routes[0].gw = range: empty":         `a route without gateway`,
		}, extra: staticCases, conf: func(env) string {
			return `{"cniVersion": "1.1.0", "name": "hostile", "type": "ptp", "ipam": {"type": "static", "addresses": [{"address": "10.62.0.2/24", "gateway": "10.62.0.1"}], "routes": [{"dst": "0.0.0.0/0", "gw": "10.62.0.1"}], "dns": {"nameservers": ["10.62.0.1"], "domain": "example.org", "search": ["example.org"], "options": ["ndots:2"]}}}`
		}},
		{name: "dhcp", ipam: true, accepted: map[string]string{
			"ipam.daemonSocketPath = range: empty":       `the default socket; only connected to`,
			"ipam.ipFamilies = range: empty":             `the default, IPv4`,
			"ipam.provide = range: empty":                `nothing to provide`,
			"ipam.provide[0].value = range: path escape": `an option's value, sent as is`,
			"ipam.provide[0].value = range: empty":       `nothing to send, as upstream skips it`,
			"ipam.request = range: empty":                `nothing to request`,
			"ipam.request = range: null element":         `an entry without an option, skipped as upstream skips it`,
			"ipam.request[0].option = range: empty":      `an entry without an option, skipped as upstream skips it`,
		}, conf: func(e env) string {
			return fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "hostile", "type": "ptp", "ipam": {"type": "dhcp", "daemonSocketPath": %q, "request": [{"option": "classless-static-routes", "skipDefault": false}], "provide": [{"option": "host-name", "value": "pod"}], "priority": 1, "ipFamilies": ["ipv4"]}}`, e.sock)
		}},
		{name: "bandwidth", chained: true, accepted: map[string]string{
			"ingressRate = range: above 2^32":                         `4.3 Gbit/s`,
			"egressRate = range: above 2^32":                          `4.3 Gbit/s`,
			"runtimeConfig.bandwidth.ingressRate = range: above 2^32": `4.3 Gbit/s`,
			"runtimeConfig.bandwidth.egressRate = range: above 2^32":  `4.3 Gbit/s`,
			"ingressBurst = range: above 2^32":                        `512 MiB, which tbf takes`,
			"egressBurst = range: above 2^32":                         `512 MiB, which tbf takes`,
			// Issue 23: a burst tbf cannot hold at its rate is clamped, as
			// the ones runtimes send (1000 B/s here: 275 kB installed).
			"runtimeConfig.bandwidth.ingressBurst = range: above 2^32": `clamped to what tbf holds at the rate`,
			"runtimeConfig.bandwidth.egressBurst = range: above 2^32":  `clamped to what tbf holds at the rate`,
		}, conf: chainedConf("bandwidth", `"ingressRate": 8000, "ingressBurst": 8000, "egressRate": 8000, "egressBurst": 8000, "runtimeConfig": {"bandwidth": {"ingressRate": 8000, "ingressBurst": 8000, "egressRate": 8000, "egressBurst": 8000}}`)},
		{name: "firewall", chained: true, accepted: map[string]string{
			"backend = range: empty":                      `the default backend`,
			"backend = range: path escape":                `an unknown backend is absent, as upstream's getBackend takes it (ADD warns)`,
			"backend = range: overlong":                   `an unknown backend is absent, as upstream's getBackend takes it (ADD warns)`,
			"ingressPolicy = range: empty":                `the default policy, open`,
			"iptablesAdminChainName = range: empty":       `the default chain, CNI-ADMIN`,
			"iptablesAdminChainName = range: path escape": `a chain name, not a path: iptables takes it`,
			"prevResult interface nosuch0":                `rules match addresses, not the interface (as upstream)`,
			"prevResult sandbox elsewhere":                `rules match addresses, not the interface (as upstream)`,
		}, conf: chainedConf("firewall", `"backend": "iptables", "iptablesAdminChainName": "HOSTILE-ADMIN", "ingressPolicy": "same-bridge"`)},
		{name: "portmap", chained: true, accepted: map[string]string{
			"conditionsV4 = range: empty":                           `no conditions`,
			"runtimeConfig.portMappings = range: empty":             `nothing to map`,
			"runtimeConfig.portMappings[0].hostIP = range: empty":   `every host address`,
			"runtimeConfig.portMappings[0].protocol = range: empty": `the default protocol, tcp`,
			"prevResult interface nosuch0":                          `rules match addresses, not the interface (as upstream)`,
			"prevResult sandbox elsewhere":                          `rules match addresses, not the interface (as upstream)`,
		}, conf: chainedConf("portmap", `"backend": "iptables", "snat": true, "masqAll": false, "markMasqBit": 13, "conditionsV4": ["-s", "10.0.0.0/8"], "runtimeConfig": {"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "10.70.0.1"}]}`)},
		{name: "sbr", chained: true, conf: chainedConf("sbr", `"table": 300, "addSourceHints": false`)},
		{name: "tuning", chained: true, accepted: map[string]string{
			// Not run: it would write below the real /run/cni.
			"dataDir = range: empty":                              `upstream's default, /run/cni/tuning`,
			"mac = range: empty":                                  `the MAC is left alone`,
			"sysctl.net.ipv4.conf.eth0.arp_filter = range: empty": `an empty write, which the kernel takes as a no-op (as upstream)`,
		}, extra: tuningCases, conf: func(e env) string {
			return chainedConf("tuning", fmt.Sprintf(`"dataDir": %q, "sysctl": {"net.ipv4.conf.eth0.arp_filter": "1"}, "mac": "02:00:00:00:00:03", "promisc": false, "mtu": 1400, "txQLen": 100, "allmulti": false`, e.tuning))(e)
		}},
		{name: "vrf", chained: true, conf: chainedConf("vrf", `"vrfname": "hostilevrf", "table": 300`)},
	}
}

// walkRule says which paths of a target's config are mutated (self) and
// which subtrees are walked (below).
func walkRule(t target) func(p string) (self, below bool) {
	return func(p string) (bool, bool) {
		switch {
		case p == "":
			return true, false
		case p == "cniVersion", p == "type":
			return true, true // cases of their own; type picks the binary
		case p == "prevResult.cniVersion":
			return true, true // a case of its own: another version
		case !t.ipam && strings.HasPrefix(p, "ipam."):
			// Another plugin's keys, walked in that plugin's own target;
			// ipam.type names the binary: cases of its own.
			return true, true
		case t.ipam && p == "ipam.type":
			return true, true // the IPAM binary is exec'd directly
		}
		return false, false
	}
}

// anyCode is every code a config error may carry: 6 when the JSON does
// not decode into the config's shape, 7 when a value is invalid.
var configCodes = []uint{types.ErrDecodingFailure, types.ErrInvalidNetworkConfig}

// cases makes every case of t.
func cases(t target, e env) (all []hcase, accepted int) {
	base := t.conf(e)
	root, err := decode(base)
	Expect(err).NotTo(HaveOccurred(), "%s base config", t.name)
	firstWrong := map[string]bool{}
	for _, m := range mutations(root, walkRule(t)) {
		if _, ok := t.accepted[m.String()]; ok {
			accepted++
			continue
		}
		stdin, err := apply(base, m)
		Expect(err).NotTo(HaveOccurred())
		codes := configCodes
		if !strings.HasPrefix(pathString(m.path), "prevResult") {
			// Valid JSON with a value of the wrong type or range is an
			// invalid config, never "failed to decode" (issue 22).
			codes = []uint{types.ErrInvalidNetworkConfig}
		}
		all = append(all, hcase{name: m.String(), verb: "ADD", stdin: stdin, codes: codes, mention: mentions(m)})
		// DEL and CHECK parse the config as ADD does: one wrong type per
		// key is enough to show they refuse it the same way.
		if p := pathString(m.path); m.wrong && !firstWrong[p] {
			firstWrong[p] = true
			verbs := []string{"CHECK", "DEL"}
			if strings.HasPrefix(p, "prevResult") {
				verbs = verbs[:1] // DEL never parses prevResult (frame specs show it)
			}
			for _, verb := range verbs {
				all = append(all, hcase{name: m.String(), verb: verb, stdin: stdin, codes: codes, mention: mentions(m), delMayPass: true})
			}
		}
	}
	more := common(t, e, base)
	if t.extra != nil {
		more = append(more, t.extra(e)...)
	}
	for _, c := range more {
		if _, ok := t.accepted[c.name]; ok {
			accepted++
			continue
		}
		all = append(all, c)
	}
	return all, accepted
}

// mentions are what an error about m may name: the key, the key above it
// when the key is data (a sysctl name), or the value put there.
func mentions(m mutation) []string {
	out := []string{m.key}
	if strings.Contains(m.key, ".") && m.parent != "" {
		out = append(out, m.parent)
	}
	if v, ok := m.value.(string); ok && !m.wrong && v != "" {
		out = append(out, v)
	}
	return out
}

func mustSet(conf string, path []any, v any) []byte {
	GinkgoHelper()
	b, err := set(conf, path, v)
	Expect(err).NotTo(HaveOccurred())
	return b
}

type verbValues struct {
	verb   string
	values []string
}

// common are the cases every plugin gets: versions, interface and
// container names, IPAM types, prevResults.
func common(t target, e env, base string) []hcase {
	var out []hcase
	// The versions, interface names and container IDs are refused in
	// pkg/plugin for every plugin alike: a few per verb show each plugin
	// goes through it.
	for _, vv := range []verbValues{{"ADD", []string{"9.9.9", "1.1", "v1.0.0"}}, {"CHECK", []string{"0.0.1"}}, {"DEL", []string{"abc"}}} {
		verb := vv.verb
		for _, v := range vv.values {
			out = append(out, hcase{name: "cniVersion " + v, verb: verb, stdin: mustSet(base, []any{"cniVersion"}, v),
				codes: []uint{types.ErrIncompatibleCNIVersion}, mention: []string{v}})
		}
	}
	for _, v := range []any{json.Number("1"), map[string]any{}} {
		out = append(out, hcase{name: fmt.Sprintf("cniVersion %v", v), verb: "ADD", stdin: mustSet(base, []any{"cniVersion"}, v),
			codes: []uint{types.ErrInvalidNetworkConfig}, mention: []string{"cniVersion"}})
	}
	for _, vv := range []verbValues{{"ADD", []string{"net1234567890abc", "a/b", ".."}}, {"CHECK", []string{"a b"}}, {"DEL", []string{"../../x"}}} {
		verb := vv.verb
		for _, ifName := range vv.values {
			out = append(out, hcase{name: "CNI_IFNAME " + ifName, verb: verb, stdin: []byte(base), ifName: ifName,
				codes: []uint{types.ErrInvalidEnvironmentVariables}, mention: []string{ifName, "CNI_IFNAME"}})
		}
	}
	for _, vv := range []verbValues{{"ADD", []string{"../x", "/etc"}}, {"DEL", []string{"a/b"}}} {
		verb := vv.verb
		for _, id := range vv.values {
			out = append(out, hcase{name: "CNI_CONTAINERID " + id, verb: verb, stdin: []byte(base), containerID: id,
				codes: []uint{types.ErrInvalidEnvironmentVariables}, mention: []string{id, "CNI_CONTAINERID"}})
		}
	}
	if strings.Contains(base, `"ipam"`) && !t.ipam {
		for _, typ := range []string{"../x", "/bin/sh", "a/b", "..", "nosuch-ipam"} {
			verbs := []string{"ADD"}
			switch typ {
			case "../x":
				verbs = append(verbs, "CHECK", "DEL")
			case "nosuch-ipam":
				verbs = append(verbs, "DEL") // CHECK without prevResult is refused before the lookup
			}
			for _, verb := range verbs {
				out = append(out, hcase{name: "ipam.type " + typ, verb: verb, stdin: mustSet(base, []any{"ipam", "type"}, typ),
					codes: []uint{types.ErrInvalidNetworkConfig}, mention: []string{typ}})
			}
		}
	}
	if t.prevMaster {
		for _, v := range []string{"1.0.0", "9.9.9"} {
			out = append(out, hcase{name: "prevResult.cniVersion " + v, verb: "ADD", stdin: mustSet(base, []any{"prevResult", "cniVersion"}, v),
				codes: []uint{types.ErrIncompatibleCNIVersion}, mention: []string{v}})
		}
		out = append(out, hcase{name: "prevResult master nosuch0", verb: "ADD", stdin: mustSet(base, []any{"prevResult", "interfaces", 0, "name"}, "nosuch0"),
			codes: []uint{types.ErrInvalidNetworkConfig}, mention: []string{"nosuch0"}})
	}
	if t.chained {
		for _, v := range []string{"0.3.1", "0.4.0", "1.0.0", "9.9.9"} {
			for _, verb := range []string{"ADD", "CHECK"} {
				out = append(out, hcase{name: "prevResult.cniVersion " + v, verb: verb, stdin: mustSet(base, []any{"prevResult", "cniVersion"}, v),
					codes: []uint{types.ErrIncompatibleCNIVersion}, mention: []string{v}})
			}
		}
		gone := mustSet(base, []any{"prevResult", "interfaces", 1, "name"}, "nosuch0")
		for _, verb := range []string{"ADD", "CHECK"} {
			out = append(out, hcase{name: "prevResult interface nosuch0", verb: verb, stdin: gone, ifName: "nosuch0",
				codes: []uint{types.ErrInvalidNetworkConfig, types.ErrInvalidEnvironmentVariables}, mention: []string{"nosuch0"}})
		}
		other := mustSet(base, []any{"prevResult", "interfaces", 1, "sandbox"}, "/run/netns/cniforge-test-nosuch")
		out = append(out, hcase{name: "prevResult sandbox elsewhere", verb: "ADD", stdin: other,
			codes: []uint{types.ErrInvalidNetworkConfig, types.ErrInvalidEnvironmentVariables}, mention: []string{"sandbox", "cniforge-test-nosuch"}})
	}
	return out
}

// lanes is how many calls run at once, each lane in namespaces and
// folders of its own.
const lanes = 3

var _ = Describe("hostile input", func() {
	for _, t := range targets() {
		It(t.name+" refuses it with a coded error naming the key, and changes nothing", func() {
			var (
				mu       sync.Mutex
				failures []string
				ran      int
				accepted int
				wg       sync.WaitGroup
			)
			// Every lane and its cases are made before any call runs: a
			// setup failure must not end the spec under a running lane.
			ls := make([]*lane, lanes)
			work := make([][]hcase, lanes)
			for i := range lanes {
				ls[i] = newLane(t)
				all, acc := cases(t, ls[i].env)
				accepted = acc
				for j := i; j < len(all); j += lanes {
					work[i] = append(work[i], all[j])
				}
			}
			for i := range lanes {
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					f := ls[i].run(t, work[i])
					mu.Lock()
					defer mu.Unlock()
					failures = append(failures, f...)
					ran += len(work[i])
				}()
			}
			wg.Wait()
			AddReportEntry(t.name+" cases", fmt.Sprintf("%d run, %d accepted mutations not run", ran, accepted))
			fmt.Fprintf(GinkgoWriter, "%s: %d cases run, %d accepted mutations not run, %d failures\n", t.name, ran, accepted, len(failures))
			Expect(failures).To(BeEmpty(), "%d of %d cases failed:\n%s", len(failures), ran, strings.Join(failures, "\n"))
		})
	}
})

// lane is a stand-in host, a container and folders, for one stream of calls.
type lane struct {
	env            env
	hostNS, contNS *ns.NetNS
	ifName, cwd    string
}

func newLane(t target) *lane {
	GinkgoHelper()
	hostNS := testutil.NewNS()
	contNS := testutil.NewNS()
	root := GinkgoT().TempDir()
	l := &lane{
		env: env{
			root:     root,
			dataDir:  filepath.Join(root, "a", "b", "host-local"),
			tuning:   filepath.Join(root, "a", "b", "tuning"),
			sock:     filepath.Join(root, "a", "dhcp.sock"),
			contPath: contNS.Path(),
		},
		hostNS: hostNS, contNS: contNS,
		ifName: "net1",
		// The plugin runs in a folder of its own: a relative path in a
		// config lands there, where the snapshot sees it.
		cwd: filepath.Join(root, "a", "b", "cwd"),
	}
	if t.chained {
		l.ifName = "eth0"
	}
	// hostile0/hostile1 are a master and a device to hand over; eth0 is
	// the container end a chained plugin adjusts.
	Expect(testutil.ConnectNS(testutil.VethEnd{NS: hostNS, Name: "hostile0"}, testutil.VethEnd{NS: hostNS, Name: "hostile1"})).To(Succeed())
	Expect(testutil.ConnectNS(
		testutil.VethEnd{NS: hostNS, Name: "hveth0", Addrs: []string{"10.70.0.1/24"}},
		testutil.VethEnd{NS: contNS, Name: "eth0", Addrs: []string{"10.70.0.2/24"}})).To(Succeed())
	// The data folders exist, as on a node that ran a pod before: a failed
	// ADD need not remove a folder it made, but must add nothing in it
	// (nor next to it).
	for _, d := range []string{l.cwd, l.env.dataDir, l.env.tuning} {
		Expect(os.MkdirAll(d, 0o700)).To(Succeed())
	}
	return l
}

// run execs each case in l and returns what went wrong.
func (l *lane) run(t target, cases []hcase) (failures []string) {
	GinkgoHelper()
	state := func() testutil.NodeSnapshot {
		return testutil.TakeNodeSnapshot(testutil.NodeOpts{Host: l.hostNS, Cont: l.contNS, Dirs: []string{l.env.root}})
	}
	rules := func() string { return testutil.NetfilterRuleset(l.hostNS) + testutil.NetfilterRuleset(l.contNS) }
	before, rulesBefore := state(), rules()
	for _, c := range cases {
		call := testutil.Call{Command: c.verb, ContainerID: "hostile", Netns: l.contNS.Path(), IfName: l.ifName, Args: c.args, Stdin: c.stdin, Dir: l.cwd}
		if c.ifName != "" {
			call.IfName = c.ifName
		}
		if c.containerID != "" {
			call.ContainerID = c.containerID
		}
		var out testutil.Output
		err := l.hostNS.Do(func() (err error) {
			out, err = testutil.Exec(t.binary(), call)
			return err
		})
		where := fmt.Sprintf("%s %s [%s]", t.name, c.verb, c.name)
		if problem := judge(c, out, err); problem != "" {
			failures = append(failures, where+": "+problem)
		}
		if err == nil && out.Err == nil && c.verb == "ADD" {
			// Accepted: undo it, so that the cases after it meet the node
			// as it was (what DEL leaves is reported below).
			call.Command = "DEL"
			_ = l.hostNS.Do(func() (err error) { _, err = testutil.Exec(t.binary(), call); return err }) // best effort: the state comparison reports what is left
		}
		if after := state(); !slices.Equal(before, after) {
			failures = append(failures, where+": changed the node:\n"+before.Diff(after))
			before = after // report each change once
		}
	}
	if after := rules(); after != rulesBefore {
		// Compared as text, rule order included; shown as the lines that
		// differ (none when only the order did).
		was, is := testutil.Lines("netfilter", strings.Split(rulesBefore, "\n")), testutil.Lines("netfilter", strings.Split(after, "\n"))
		failures = append(failures, t.name+": some case changed the netfilter rules:\n"+was.Diff(is))
	}
	return failures
}

// judge returns what is wrong with out as the answer to c, or "".
func judge(c hcase, out testutil.Output, execErr error) string {
	if execErr != nil {
		return execErr.Error()
	}
	if out.Err == nil {
		if c.verb == "DEL" && c.delMayPass {
			return ""
		}
		return fmt.Sprintf("accepted (stdout %s)", strings.TrimSpace(string(out.Stdout)))
	}
	text := out.Err.Msg + " " + out.Err.Details
	if !slices.Contains(c.codes, out.Err.Code) {
		return fmt.Sprintf("code %d, want one of %v: %s", out.Err.Code, c.codes, text)
	}
	for _, m := range c.mention {
		if strings.Contains(strings.ToLower(text), strings.ToLower(m)) {
			return ""
		}
	}
	return fmt.Sprintf("message names none of %q: code %d %s", c.mention, out.Err.Code, text)
}

// hostDeviceCases name the device by a sysfs path or PCI address that
// would leave /sys.
func hostDeviceCases(e env) []hcase {
	var out []hcase
	base := mainConf("host-device", "")(e)
	for _, kv := range [][2]string{
		{"kernelpath", "/sys/devices/../../etc"}, {"kernelpath", "../../etc"}, {"kernelpath", "/etc/passwd"},
		{"pciBusID", "../../../etc"}, {"pciBusID", "0000:00:1f.6/../../x"}, {"device", "../hostile0"}, {"device", "a/b"},
		{"hwaddr", "../../x"},
	} {
		out = append(out, hcase{name: kv[0] + " " + kv[1], verb: "ADD", stdin: mustSet(base, []any{kv[0]}, kv[1]),
			codes: []uint{types.ErrInvalidNetworkConfig}, mention: []string{kv[0], kv[1]}})
	}
	return out
}

// tuningCases are sysctl names that would leave /proc/sys/net.
func tuningCases(e env) []hcase {
	var out []hcase
	base := chainedConf("tuning", "")(e)
	for _, key := range []string{"net/../kernel/hostname", "net.ipv4.conf.eth0/../../../../kernel.hostname", "../../etc/x", "/kernel/hostname", "kernel.hostname", "net.ipv4.conf.IFNAME..arp_filter"} {
		out = append(out, hcase{name: "sysctl " + key, verb: "ADD", stdin: mustSet(base, []any{"sysctl"}, map[string]any{key: "1"}),
			codes: []uint{types.ErrInvalidNetworkConfig}, mention: []string{key}})
	}
	out = append(out, hcase{name: "CNI_ARGS MAC", verb: "ADD", stdin: []byte(base), args: "MAC=nonsense",
		codes: []uint{types.ErrInvalidNetworkConfig, types.ErrInvalidEnvironmentVariables}, mention: []string{"MAC"}})
	return out
}

// hostLocalCases are CNI_ARGS that do not parse or ask for nonsense.
func hostLocalCases(e env) []hcase {
	base := fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "hostile", "type": "ptp", "ipam": %s}`, hl(e))
	var out []hcase
	for _, args := range []string{"IP=nonsense", "IP=10.99.0.5", "garbage", "IP=../x"} {
		out = append(out, hcase{name: "CNI_ARGS " + args, verb: "ADD", stdin: []byte(base), args: args,
			codes: []uint{types.ErrInvalidNetworkConfig, types.ErrInvalidEnvironmentVariables}, mention: []string{"CNI_ARGS"}})
	}
	return out
}

// staticCases are CNI_ARGS that do not parse or ask for nonsense.
func staticCases(e env) []hcase {
	base := `{"cniVersion": "1.1.0", "name": "hostile", "type": "ptp", "ipam": {"type": "static"}}`
	var out []hcase
	// A GATEWAY in the subnet of no address is dropped with a warning, as
	// upstream drops it: not a hostile input.
	for _, args := range []string{"IP=nonsense", "GATEWAY=nonsense", "garbage", "IP=../x"} {
		out = append(out, hcase{name: "CNI_ARGS " + args, verb: "ADD", stdin: []byte(base), args: args,
			codes: []uint{types.ErrInvalidNetworkConfig, types.ErrInvalidEnvironmentVariables}, mention: []string{"CNI_ARGS"}})
	}
	return out
}

func (t target) binary() string {
	if t.bin != "" {
		return t.bin
	}
	return t.name
}
