package tap

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/plugin"
)

// ParseConfig exposes parseConfig to the config tests.
var ParseConfig = parseConfig

// MACString is the MAC parseConfig picked, "" for none.
func (c *config) MACString() string {
	if c.mac == nil {
		return ""
	}
	return c.mac.String()
}

// WithSELinux returns the plugin as if SELinux were on (or off).
func WithSELinux(on bool, hooks attach.Hooks) plugin.Plugin {
	return newPlugin(func() bool { return on }).Descriptor(hooks)
}
