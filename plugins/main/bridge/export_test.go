package bridge

import "github.com/cniforge/plugins/pkg/plugin"

// AddSteps are the ADD steps in order, as FailingAfter names them.
var AddSteps = []string{"bridge", "ipam", "veth", "port", "container", "gateway", "forwarding", "masquerade", "macspoof", "wait"}

// FailingAfter returns the plugin with ADD failing right after step.
func FailingAfter(step string) plugin.Plugin {
	p := newPlugin()
	p.failAfter = step
	return p.descriptor()
}

// FailingAfterWith is FailingAfter, running hook before the undos.
func FailingAfterWith(step string, hook func()) plugin.Plugin {
	p := newPlugin()
	p.failAfter = step
	p.beforeUndo = hook
	return p.descriptor()
}

// ParseConfig exposes parseConfig to the config tests.
var ParseConfig = parseConfig

// Config accessors for the config tests.
func (c *config) Layer3() bool { return c.layer3 }
func (c *config) MACString() string {
	if c.mac == nil {
		return ""
	}
	return c.mac.String()
}
func (c *config) Trunks() [][2]int { return c.trunks }
