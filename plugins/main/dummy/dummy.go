package dummy

import (
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/link"
)

// add makes the dummy in the container itself (it has no master), still
// under a temporary name until it carries the alias, then runs IPAM.
func add(a *attach.Attachment, c *netConf) (types.Result, error) {
	return link.Add(a, &netlink.Dummy{LinkAttrs: netlink.NewLinkAttrs()}, link.AddOptions{Addrs: a.IPAMAdd, DNS: c.DNS})
}

func check(a *attach.Attachment, c *netConf, prev *current.Result) error {
	return link.CheckAttachment(a, prev, nil, link.Want{Kind: "dummy"})
}
