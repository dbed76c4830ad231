package link

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/ipam"
	"github.com/cniforge/plugins/pkg/plugin"
)

// Plugin describes a plugin whose whole attachment is one link of Kind in
// the container (macvlan, ipvlan, vlan, dummy) to the frame in pkg/attach.
// Its ADD ends in Add, so its steps are AddSteps. Its DEL is the same for
// all of them: DeleteOwned of CNI_IFNAME (a Kind link of this attachment,
// or untagged), then the frame releases IPAM. DEL decodes the config
// without validating it (attach.DecodeOnly): the link is found by
// CNI_IFNAME and its alias, IPAM by ipam, so a config edited since ADD that
// no longer validates does not stop it.
//
// T is the plugin's config type, PT its pointer (the one attach.Conf).
type Plugin[T any, PT interface {
	*T
	attach.Conf
}] struct {
	Kind    string // the link kind, which is also the plugin's name and type
	Summary string
	Parse   func(args *skel.CmdArgs) (PT, error)
	Add     func(a *attach.Attachment, c PT) (types.Result, error)
	Check   func(a *attach.Attachment, c PT, prev *current.Result) error
}

// New returns the plugin's descriptor running with hooks.
func (p Plugin[T, PT]) New(hooks attach.Hooks) plugin.Plugin {
	return attach.Plugin[PT]{
		Name:    p.Kind,
		Summary: p.Summary,
		IPAM:    ipam.Frame{},
		Parse:   p.Parse,
		Add:     p.Add,
		Lenient: attach.DecodeOnly[T, PT],
		Del: func(a *attach.Attachment, _ PT) []error {
			return []error{DeleteOwned(a.Args.Netns, a.Args.IfName, p.Kind, a.Alias())}
		},
		Check: p.Check,
		// GC and STATUS: the frame's (IPAM). The link dies with its namespace.
	}.Descriptor(hooks)
}

// Descriptor returns the plugin's descriptor, without hooks.
func (p Plugin[T, PT]) Descriptor() plugin.Plugin { return p.New(attach.Hooks{}) }
