package ptp

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/result"
)

// cmdGC forwards to IPAM, which releases reservations of attachments not
// in cni.dev/valid-attachments, and removes the masquerade rules of this
// network whose owner is not listed, on both backends (the rules may come
// from an ADD with another ipMasqBackend). Veths need no collection: they
// die with their namespace.
func (p *ptp) cmdGC(args *skel.CmdArgs) (err error) {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	// Refused without the list: "keep nothing" would strip every
	// attachment of the network of its masquerade.
	valid, err := result.GCAttachments(args.StdinData)
	if err != nil {
		return err
	}
	var errs []error
	if err := ipam.GC(context.TODO(), conf.IPAM.Type, args.StdinData); err != nil {
		errs = append(errs, fmt.Errorf("ipam %s GC: %w", conf.IPAM.Type, err))
	}
	keep := netfilter.Owners(conf.Name, valid)
	if err := netfilter.GCMasqAll(conf.Name, keep); err != nil {
		errs = append(errs, fmt.Errorf("masquerade GC: %w", err))
	}
	return errors.Join(errs...)
}

// cmdStatus forwards to IPAM: ptp itself needs nothing that could be
// unavailable.
func (p *ptp) cmdStatus(args *skel.CmdArgs) (err error) {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if err := ipam.Status(context.TODO(), conf.IPAM.Type, args.StdinData); err != nil {
		return fmt.Errorf("ipam %s STATUS: %w", conf.IPAM.Type, err)
	}
	return nil
}
