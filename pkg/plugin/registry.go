package plugin

import "sync"

// The registry holds the plugins linked into this executable when it is the
// multicall binary (cmd/cniforge registers them before running one). The
// separate binaries register nothing, so pkg/ipam always execs from them.
var (
	registryMu sync.RWMutex
	registry   = map[string]Plugin{}
)

// Register makes ps known to Lookup. Safe to call more than once.
func Register(ps ...Plugin) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, p := range ps {
		registry[p.Name] = p
	}
}

// Lookup returns the registered plugin with that name.
func Lookup(name string) (Plugin, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	p, ok := registry[name]
	return p, ok
}
