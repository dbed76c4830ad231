package testutil

import (
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/onsi/ginkgo/v2"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/plugin"
)

// AttachEnv is each spec's ground for a plugin that attaches IfName in a
// container: a stand-in host namespace the plugin runs in, a container
// namespace and a data folder for host-local. Get it from UseAttachEnv.
type AttachEnv struct {
	HostNS, ContNS *ns.NetNS
	DataDir        string
	Plugin         plugin.Plugin
	IfName         string
}

// UseAttachEnv returns the AttachEnv of p attaching ifName, for the specs
// of the container node it is called in: it registers a BeforeEach that
// gives the env fresh namespaces and a fresh data folder for each spec,
// removed after it. A BeforeEach registered before it runs first (a
// kernelfeature.Require, say).
func UseAttachEnv(p plugin.Plugin, ifName string) *AttachEnv {
	e := &AttachEnv{Plugin: p, IfName: ifName}
	ginkgo.BeforeEach(func() {
		e.HostNS, e.ContNS, e.DataDir = NewNS(), NewNS(), ginkgo.GinkgoT().TempDir()
	})
	return e
}

// Call is cmd for container id's attachment of IfName in n (nil: no
// CNI_NETNS, as a runtime's DEL of a gone namespace).
func (e *AttachEnv) Call(cmd, id string, n *ns.NetNS, stdin []byte) Call {
	return NewCall(cmd, id, e.IfName, n, stdin)
}

// Run runs cmd (see Call) with Plugin in HostNS; the CNI error, if any, is
// in Output.Err.
func (e *AttachEnv) Run(cmd, id string, n *ns.NetNS, stdin []byte) Output {
	ginkgo.GinkgoHelper()
	return RunIn(e.HostNS, e.Plugin, e.Call(cmd, id, n, stdin))
}

// Must is Run that fails the spec when the plugin reports an error.
func (e *AttachEnv) Must(cmd, id string, n *ns.NetNS, stdin []byte) Output {
	ginkgo.GinkgoHelper()
	return MustRunIn(e.HostNS, e.Plugin, e.Call(cmd, id, n, stdin))
}

// Add runs ADD for container id in n, which must succeed, and returns its
// result (printed in spec version ver) as current.
func (e *AttachEnv) Add(ver, id string, n *ns.NetNS, stdin []byte) *current.Result {
	ginkgo.GinkgoHelper()
	return ParseResult(ver, e.Must("ADD", id, n, stdin).Stdout)
}

// Snapshot is TakeSnapshot of the two namespaces and the data folder.
func (e *AttachEnv) Snapshot(extra ...func() []string) Snapshot {
	ginkgo.GinkgoHelper()
	return TakeSnapshot(e.HostNS, e.ContNS, e.DataDir, extra...)
}
