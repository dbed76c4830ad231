package tap

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
)

// del deletes the tap when it is a tuntap tagged with this attachment's
// alias, or untagged (an upstream ADD tags nothing); a namespace that is
// gone took its tap with it. The frame releases IPAM after it.
func del(a *attach.Attachment, c *config) []error {
	return []error{link.DeleteOwned(a.Args.Netns, a.Args.IfName, "tuntap", a.Alias())}
}
