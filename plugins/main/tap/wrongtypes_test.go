package tap

import (
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// TestWrongTypes: a value of the wrong type or sign under any key is code
// 7, naming the key as written and the value (issue 22).
func TestWrongTypes(t *testing.T) {
	testutil.CheckWrongTypes(t, netConf{}, `{"cniVersion": "1.1.0", "name": "n", "type": "tap"}`, testutil.ParseErrWith(parseConfig, ""))
}
