package ipam

import (
	"path/filepath"
	"testing"

	"github.com/cniforge/plugins/pkg/testutil"
)

// FuzzValidateType: an IPAM type (any string from a config) is accepted
// only when it names a file directly inside the CNI_PATH folder it is
// looked up in, never one above or beside it.
func FuzzValidateType(f *testing.F) {
	for _, s := range []string{"host-local", "static", "dhcp", "../bin/x", `..\x`, ".", "..", "a/b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, typ string) {
		var err error
		testutil.Bounded(t, "ValidateType", func() { err = ValidateType(typ) })
		if err != nil {
			return
		}
		const dir = "/opt/cni/bin"
		if p := filepath.Join(dir, typ); filepath.Dir(p) != dir || filepath.Base(p) != typ {
			t.Fatalf("ipam.type %q accepted, but it names %s, not a file in %s", typ, p, dir)
		}
	})
}
