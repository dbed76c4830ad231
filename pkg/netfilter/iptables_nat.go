package netfilter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/go-iptables/iptables"
)

// natUsable probes, through go-iptables, whether the nat table of f can be
// used here (the binary runs and the kernel provides the table). It costs
// two processes, so it runs only to explain a failure or to pick the
// default backend after one.
func (m *iptablesMasq) natUsable(f family) error {
	proto := iptables.ProtocolIPv4
	if f == ipv6 {
		proto = iptables.ProtocolIPv6
	}
	var ipt *iptables.IPTables
	var err error
	if m.variant == "" {
		ipt, err = iptables.New(iptables.IPFamily(proto))
	} else {
		base := "iptables"
		if f == ipv6 {
			base = "ip6tables"
		}
		ipt, err = iptables.New(iptables.IPFamily(proto), iptables.Path(base+"-"+m.variant))
	}
	if err != nil {
		return fmt.Errorf("%s %w: %w", f, ErrUnavailable, err)
	}
	probe := func() error { _, err := ipt.ChainExists("nat", "POSTROUTING"); return err }
	if m.natProbe != nil {
		probe = func() error { return m.natProbe(f) }
	}
	if err := probe(); err != nil {
		if !natAbsent(err) {
			return fmt.Errorf("%s nat table check: %w", f, err)
		}
		return fmt.Errorf("%s nat table: %w: %w", f, ErrUnavailable, err)
	}
	return nil
}

// natAbsent reports whether err, from iptables, says that this kernel has
// no such table (iptables-legacy: "Table does not exist", exit 3) or no
// nf_tables (iptables-nft: "Protocol not supported"): then no rule can
// exist. Anything else (the xtables lock, "Permission denied", a killed
// process; exit 4 is iptables' RESOURCE_PROBLEM) says nothing about what
// the kernel holds. iptables reports these only as text and exit codes.
func natAbsent(err error) bool {
	var ie *iptables.Error
	if errors.As(err, &ie) && ie.ExitStatus() == 4 {
		return false
	}
	msg := err.Error()
	for _, s := range []string{"Table does not exist", "Protocol not supported", "Address family not supported"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
