package static

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// TestWrongTypes: a value of the wrong type or sign under any key is code
// 7, naming the key as written and the value (issue 22).
func TestWrongTypes(t *testing.T) {
	testutil.CheckWrongTypes(t, rawConf{}, `{"cniVersion": "1.1.0", "name": "n", "type": "bridge", "ipam": {"type": "static", "addresses": [{"address": "10.1.0.2/24"}]}}`, testutil.ParseErrWith(parseConfig, ""))
}
