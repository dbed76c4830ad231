// Package loopback is the loopback plugin: it brings up "lo" in the
// container's network namespace and reports its addresses. It runs on the
// frame in pkg/attach.
package loopback

import (
	"github.com/cniforge/plugins/pkg/attach"
)

var frame = attach.Plugin[*netConf]{
	Name:    "loopback",
	Summary: "brings up the loopback interface of the container",
	Parse:   parseConfig,
	Add:     add,
	Del:     del,
	Check:   check,
	// lo's state does not depend on what ADD reported, and upstream's
	// CHECK asks for no prevResult either.
	PrevOptional: true,
}

// Plugin is the loopback plugin's descriptor.
var Plugin = frame.Descriptor(attach.Hooks{})
