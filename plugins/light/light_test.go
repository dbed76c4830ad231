package light_test

import (
	"testing"

	"github.com/cniforge/plugins/plugins/all"
	"github.com/cniforge/plugins/plugins/companion"
	"github.com/cniforge/plugins/plugins/light"
)

func TestBinaryIsTheCompanion(t *testing.T) {
	if light.Binary != companion.Light {
		t.Errorf("light.Binary %q, companion.Light %q", light.Binary, companion.Light)
	}
}

// Lookup finds every plugin Plugins lists (cniforge-light version lists
// those, and install links them to it), each one cniforge holds too.
func TestLookupMatchesPlugins(t *testing.T) {
	for _, p := range light.Plugins() {
		if got, ok := light.Lookup(p.Name); !ok || got.Name != p.Name {
			t.Errorf("Lookup(%q) = %q, %v", p.Name, got.Name, ok)
		}
		if _, ok := all.Lookup(p.Name); !ok {
			t.Errorf("%s is not in cniforge (plugins/all)", p.Name)
		}
	}
	if _, ok := light.Lookup("bridge"); ok {
		t.Error("Lookup found bridge, which is no light plugin")
	}
}
