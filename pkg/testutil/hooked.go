package testutil

import (
	"github.com/onsi/ginkgo/v2"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
)

// HookedPlugin is a plugin built anew for each run with hooks H (attach.Hooks:
// failure injection), run in-process for one container. H is a type
// parameter because pkg/attach's own tests import this package.
type HookedPlugin[H any] struct {
	New         func(H) plugin.Plugin
	ContainerID string
}

// Run runs cmd for ifName in n with the plugin New(hooks) builds, inside
// hostNS; the CNI error, if any, is in Output.Err.
func (p HookedPlugin[H]) Run(hostNS *ns.NetNS, hooks H, cmd string, n *ns.NetNS, ifName string, stdin []byte) Output {
	ginkgo.GinkgoHelper()
	return RunIn(hostNS, p.New(hooks), NewCall(cmd, p.ContainerID, ifName, n, stdin))
}

// Must is Run without hooks that fails the spec when the plugin reports an
// error.
func (p HookedPlugin[H]) Must(hostNS *ns.NetNS, cmd string, n *ns.NetNS, ifName string, stdin []byte) Output {
	ginkgo.GinkgoHelper()
	var none H
	return MustRunIn(hostNS, p.New(none), NewCall(cmd, p.ContainerID, ifName, n, stdin))
}
