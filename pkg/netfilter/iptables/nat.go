package iptables

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/nftnl"
)

// natUsable probes whether the nat table of f can be used here (the
// binary runs and the kernel provides the table): `iptables -t nat -S
// POSTROUTING 1`. It costs a process, so it runs only to explain a failure
// or to pick the default backend after one. Exit status 1 (no such chain
// or rule) counts as usable, as it did through go-iptables' ChainExists;
// that library was dropped for this one call, since its package-level
// regexp cost every plugin exec about 80 µs before main.
func (m *Runner) NatUsable(f nftnl.Family) error {
	tool := "iptables"
	if f == nftnl.IPv6 {
		tool = "ip6tables"
	}
	if m.Variant != "" {
		tool += "-" + m.Variant
	}
	if _, err := lookPath(tool); err != nil {
		return fmt.Errorf("%s %w: %w", f, netfilter.ErrUnavailable, err)
	}
	probe := func() error {
		_, err := m.Exec(tool, []string{"-w", "-t", "nat", "-S", "POSTROUTING", "1"}, nil)
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return nil
		}
		return err
	}
	if m.NatProbe != nil {
		probe = func() error { return m.NatProbe(f) }
	}
	if err := probe(); err != nil {
		if !NatAbsent(err) {
			return fmt.Errorf("%s nat table check: %w", f, err)
		}
		return fmt.Errorf("%s nat table: %w: %w", f, netfilter.ErrUnavailable, err)
	}
	return nil
}

// natAbsent reports whether err, from iptables, says that this kernel has
// no such table (iptables-legacy: "Table does not exist", exit 3) or no
// nf_tables (iptables-nft: "Protocol not supported"): then no rule can
// exist. Anything else (the xtables lock, "Permission denied", a killed
// process; exit 4 is iptables' RESOURCE_PROBLEM) says nothing about what
// the kernel holds. iptables reports these only as text and exit codes.
func NatAbsent(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 4 {
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
