package main

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// `cniforge-dhcp version` is what cniforge install reads to link dhcp here.
func TestVersionListsItsPlugin(t *testing.T) {
	testutil.MulticallVersion(t, multicall, "cniforge-dhcp", "dhcp")
}
