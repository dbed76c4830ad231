package bridge

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/netfilter"
	"github.com/cniforge/plugins/pkg/netfilter/macspoof"
)

// gc removes the MAC spoof-checks of this network's attachments that the
// runtime no longer lists; the frame forwards GC to IPAM and collects
// masquerade rules (both backends) first. STATUS is the frame's: IPAM's.
func gc(_ *attach.Attachment, conf *config, keep []netfilter.Owner) []error {
	return []error{macspoof.GCMacSpoofChecks(conf.Name, keep)}
}
