package static

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/result"
)

func cmdAdd(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	if len(conf.addresses) == 0 {
		// A 0.1.0/0.2.0 result cannot be written without an address.
		if multi, _ := version.GreaterThanOrEqualTo(conf.cniVersion, "0.3.0"); !multi {
			return result.InvalidConfig(fmt.Errorf(
				"ipam.addresses: none given (nor runtimeConfig.ips, args.cni.ips or CNI_ARGS IP), and a cniVersion %s result needs one",
				conf.cniVersion))
		}
		// Upstream static accepts this too (an interface with routes or DNS
		// only), but it is more often a misspelt key: say so on stderr.
		plugin.Logger("ADD", args).Warn("no addresses to hand out: set ipam.addresses, runtimeConfig.ips, args.cni.ips or CNI_ARGS IP")
	}
	for _, g := range conf.unusedGateways {
		plugin.Logger("ADD", args).Warn("gateway dropped: in the subnet of no address, as upstream drops it", "gateway", g)
	}
	return result.Fprint(plugin.Stdout(args), conf.result(), conf.cniVersion)
}

// result is what ADD reports: every address with its gateway, the routes
// and DNS. IPAM results name no interface; the calling plugin assigns them.
func (conf *netConf) result() *current.Result {
	res := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Routes:     conf.routes,
		DNS:        conf.dns,
	}
	for _, a := range conf.addresses {
		res.IPs = append(res.IPs, &current.IPConfig{Address: a.net, Gateway: a.gateway})
	}
	return res
}

// cmdDel has nothing to release: static keeps no state. It parses no more
// than the JSON (see decodeOnly), so no input can block a teardown.
func cmdDel(args *skel.CmdArgs) error {
	return decodeOnly(args.StdinData)
}

// cmdCheck verifies the config and, when the runtime passes the
// attachment's prevResult, that it still holds every address static would
// hand out now (a changed config or per-call address shows up here).
func cmdCheck(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	if conf.prevResult == nil {
		return nil
	}
	for _, a := range conf.addresses {
		if !hasAddress(conf.prevResult, a) {
			return fmt.Errorf("prevResult lacks %s given by %s", a.net.String(), a.key)
		}
	}
	return nil
}

func hasAddress(res *current.Result, a address) bool {
	for _, ipc := range res.IPs {
		have, _ := ipc.Address.Mask.Size()
		want, _ := a.net.Mask.Size()
		if ipc.Address.IP.Equal(a.net.IP) && have == want {
			return true
		}
	}
	return false
}

// cmdGC has nothing to collect: static reserves nothing.
func cmdGC(args *skel.CmdArgs) error {
	return decodeOnly(args.StdinData)
}

// cmdStatus: static depends on nothing that could run out or go away. An
// invalid config value is ADD's to report, naming the key.
// cmdStatus reports whether ADD can work: it validates the network's own
// config (addresses, routes, dns) and ignores what a single call brings
// (CNI_ARGS, runtimeConfig, args), which STATUS does not have.
func cmdStatus(args *skel.CmdArgs) error {
	var obj map[string]json.RawMessage
	if err := result.DecodeConfig(args.StdinData, &obj); err != nil {
		return err
	}
	for _, perCall := range []string{"runtimeConfig", "args", "prevResult"} {
		delete(obj, perCall)
	}
	own, err := json.Marshal(obj)
	if err != nil {
		return result.Decoding(err)
	}
	_, err = parseConfig(own, "")
	return err
}
