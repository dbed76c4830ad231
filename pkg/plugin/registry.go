package plugin

import "sync"

// The registry knows the plugins linked into this executable when it is the
// multicall binary (cmd/cniforge sets a lookup before running one, and
// tests register theirs). The separate binaries set nothing, so pkg/ipam
// always execs from them.
var (
	registryMu sync.RWMutex
	registry   map[string]Plugin
	lookup     func(string) (Plugin, bool)
)

// Register makes ps known to Lookup. Safe to call more than once.
func Register(ps ...Plugin) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if registry == nil {
		registry = make(map[string]Plugin, len(ps))
	}
	for _, p := range ps {
		registry[p.Name] = p
	}
}

// SetLookup makes fn answer Lookup for names nobody registered: the
// multicall binary's own table of its plugins (a switch), so that a plugin
// exec finds its plugin without building a list of all of them.
func SetLookup(fn func(string) (Plugin, bool)) {
	registryMu.Lock()
	defer registryMu.Unlock()
	lookup = fn
}

// Lookup returns the plugin with that name, registered or known to the
// lookup SetLookup set.
func Lookup(name string) (Plugin, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	if p, ok := registry[name]; ok {
		return p, true
	}
	if lookup != nil {
		return lookup(name)
	}
	return Plugin{}, false
}
