package bridge

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/result"
)

// cmdGC forwards GC to IPAM and removes the masquerade rules (on both
// backends: the one used at ADD may not be the configured one) and MAC
// spoof-checks of this network's attachments that the runtime no longer
// lists.
func (p *bridgePlugin) cmdGC(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	// Refused without the list: "keep nothing" would strip every
	// attachment of the network of its masquerade and spoof-check.
	valid, err := result.GCAttachments(args.StdinData)
	if err != nil {
		return err
	}
	var errs []error
	if conf.layer3 {
		errs = append(errs, ipam.GC(context.TODO(), conf.IPAM.Type, conf.raw))
	}
	keep := netfilter.Owners(conf.Name, valid)
	errs = append(errs, netfilter.GCMasqAll(conf.Name, keep))
	errs = append(errs, netfilter.GCMacSpoofChecks(conf.Name, keep))
	return errors.Join(errs...)
}

// cmdStatus forwards STATUS to IPAM: the bridge itself needs nothing that
// could be unavailable.
func (p *bridgePlugin) cmdStatus(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	if conf.layer3 {
		return ipam.Status(context.TODO(), conf.IPAM.Type, conf.raw)
	}
	return nil
}
