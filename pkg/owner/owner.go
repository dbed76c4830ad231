// Package owner names one CNI attachment: its network, container ID and
// interface name, the key by which every plugin finds the state an ADD
// made (netfilter rules, bandwidth's ifb, tuning's state file), and the
// list of attachments a GC call keeps.
//
// It is a leaf: it imports no netlink and no netfilter code, so the
// plugin frame (pkg/attach) and the plugins that keep no rules can name
// an owner without linking the rule machinery. pkg/netfilter's Owner is
// this type.
package owner

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// Owner identifies one attachment's state.
type Owner struct {
	Network     string // network name from the config ("name")
	ContainerID string // CNI_CONTAINERID
	IfName      string // CNI_IFNAME
}

// Owners turns the attachments a GC call lists as still in use into the
// owners of network to keep.
func Owners(network string, attachments []types.GCAttachment) []Owner {
	keep := make([]Owner, 0, len(attachments))
	for _, a := range attachments {
		keep = append(keep, Owner{Network: network, ContainerID: a.ContainerID, IfName: a.IfName})
	}
	return keep
}

func (o Owner) String() string {
	return fmt.Sprintf("network %q container %q ifname %q", o.Network, o.ContainerID, o.IfName)
}
