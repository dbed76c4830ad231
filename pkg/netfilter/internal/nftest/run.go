package nftest

import (
	"github.com/cniforge/plugins/pkg/ns"

	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

// in runs fn inside n and returns its error, for Expect outside.
func In(n *ns.NetNS, fn func() error) error { return n.Do(fn) }

// countingRun is an iptables backend's run (see iptablesMasq.run) that
// records the name of every process it starts in calls.
func CountingRun(calls *[]string) func(name string, args []string, stdin []byte) ([]byte, error) {
	return func(name string, args []string, stdin []byte) ([]byte, error) {
		*calls = append(*calls, name)
		return iptables.RunCommand(name, args, stdin)
	}
}
