// Package companion names the smaller multicall binaries the suite ships
// beside cniforge, and which plugins each holds. It imports nothing, so
// cniforge, its node tool and the companions can all read it without
// linking a plugin.
//
// Every plugin's start pays for the inits and the size of everything its
// binary links (issue 30, docs/benchmarks.md), so `cniforge install` links
// each plugin to the smallest binary that holds it:
//   - cniforge-light: loopback, sbr, static, tuning, vrf (no rules, no
//     daemon, no IPAM delegation; upstream's binaries of them are small);
//   - cniforge-dhcp: dhcp, whose daemon is the only user of a DHCP client
//     stack (insomniacslk/dhcp and what it links), which would otherwise
//     make every other plugin's exec about 5 % costlier;
//   - cniforge: every other plugin and the node tool.
//
// cniforge holds the light plugins too (a link to it by hand still runs
// them); it does not hold dhcp, and runs cniforge-dhcp from beside itself
// when asked for it.
package companion

const (
	// Light is the light plugins' multicall binary.
	Light = "cniforge-light"
	// DHCP is the dhcp plugin's binary (its daemon too: `dhcp daemon`).
	DHCP = "cniforge-dhcp"
)

// Binaries are the companions, in the order install copies them.
func Binaries() []string { return []string{Light, DHCP} }

// Only lists the plugins bin holds that cniforge does not hold itself.
func Only(bin string) []string {
	if bin == DHCP {
		return []string{"dhcp"}
	}
	return nil
}

// Holding names the companion that holds a plugin cniforge does not hold
// itself, and "" for any other name.
func Holding(plugin string) string {
	for _, bin := range Binaries() {
		for _, p := range Only(bin) {
			if p == plugin {
				return bin
			}
		}
	}
	return ""
}
