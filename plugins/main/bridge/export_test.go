package bridge

import (
	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/testutil"
)

// FailingAfter returns the plugin with ADD failing right after step.
func FailingAfter(step string) plugin.Plugin {
	return New(attach.Hooks{AfterStep: testutil.FailAfter(step, nil)})
}

// FailingAfterWith is FailingAfter, running hook before the undos.
func FailingAfterWith(step string, hook func()) plugin.Plugin {
	return New(attach.Hooks{AfterStep: testutil.FailAfter(step, hook)})
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
func (c *config) Trunks() [][2]int    { return c.trunks }
func (c *config) VlanFiltering() bool { return c.vlanFiltering() }
