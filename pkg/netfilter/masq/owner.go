package masq

import (
	"github.com/cniforge/plugins/pkg/netfilter/iptables"
)

// iptablesChainRE matches chain names made by iptablesChain.
var iptablesChainRE = iptables.NewLazyRE(`^CNI-[0-9a-f]{24}$`)

// iptablesCommentRE reads the network and container ID back from a comment
// as iptables-save prints it (quotes escaped with backslashes).
var iptablesCommentRE = iptables.NewLazyRE(`--comment "name: \\"([^"\\]*)\\" id: \\"([^"\\]*)\\""`)
