package vrf

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// FuzzVRFConfig: any stdin and CNI_ARGS parse without a panic or a hang,
// the same way twice, or fail with a CNI error (testutil.FuzzConfig). The
// seeds in testdata/fuzz are the configs the tests hand to vrf.
func FuzzVRFConfig(f *testing.F) {
	testutil.FuzzFrameConfig(f, parse, `{"cniVersion": "1.1.0", "name": "fuzz", "type": "vrf"}`)
}
