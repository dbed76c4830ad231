package static

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// FuzzStaticConfig: any stdin and CNI_ARGS parse as ADD and CHECK parse
// them (parseConfig, prevResult included) and as DEL, GC and STATUS do
// (decodeOnly) without a panic or a hang, the same way twice, or fail with
// a CNI error. The seeds in testdata/fuzz are the configs the tests use.
func FuzzStaticConfig(f *testing.F) {
	testutil.FuzzConfig(f, func(stdin []byte, cniArgs string) (any, error) {
		conf, err := parseConfig(stdin, cniArgs)
		if err != nil {
			return nil, err
		}
		return conf, decodeOnly(stdin)
	}, `{"cniVersion": "1.1.0", "name": "fuzz", "type": "static", "ipam": {"type": "static", "addresses": [{"address": "10.1.0.5/24", "gateway": "10.1.0.1"}]}}`)
}
