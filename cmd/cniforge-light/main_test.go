package main

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// `cniforge-light version` is what cniforge install reads to know which
// links to point here.
func TestVersionListsItsPlugins(t *testing.T) {
	testutil.MulticallVersion(t, multicall, "cniforge-light", "loopback sbr static tuning vrf")
}
