package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cniforge/plugins/pkg/plugin"
)

// Daemon is the node image's command (scripts/image, deploy/): install
// the plugins into o.Dir (the host's /opt/cni/bin, mounted into the
// DaemonSet's container), then stay up until ctx is done (SIGTERM or
// SIGINT), so that the DaemonSet's pod reads Running and a new image
// version, rolled out, installs itself over the old one. A failed install
// exits 1: the pod restarts and tries again, and the node's runtime keeps
// the plugins it had (install replaces each file whole, never half).
//
// It reclaims nothing. A gc loop given after its own flags (o.GC, run by
// o.RunGC) still runs instead of only waiting (as earlier releases
// documented), but says first what it cannot do from a container
// (gcInContainer): the reclaim is the systemd timer in deploy/systemd, run
// on the host.
func Daemon(ctx context.Context, o DaemonOptions, plugins []string, stdout, stderr io.Writer) int {
	if rc := Install(o.Dir, o.Force, plugins, stdout, stderr); rc != 0 {
		return rc
	}
	if o.RunGC != nil {
		fmt.Fprintln(stderr, gcInContainer)
		fmt.Fprintf(stdout, "cniforge daemon: %s installed into %s; running cniforge %s until SIGTERM\n", plugin.SuiteVersion(), o.Dir, strings.Join(o.GC, " "))
		return o.RunGC()
	}
	fmt.Fprintf(stdout, "cniforge daemon: %s installed into %s; waiting for SIGTERM\n", plugin.SuiteVersion(), o.Dir)
	<-ctx.Done()
	fmt.Fprintln(stdout, "cniforge daemon: stopping; the installed plugins stay")
	_ = os.Stdout.Sync() // best effort: the log line is all that is left to write
	return 0
}

// DaemonOptions are daemon's flags.
type DaemonOptions struct {
	Dir   string // the host's plugin directory, as mounted in this container
	Force bool   // replace files that are not cniforge's (upstream's plugins, say)
	// GC is the gc command line given after --, for the log; RunGC runs it
	// (nil: none given).
	GC    []string
	RunGC func() int
}

// gcInContainer is what the daemon's gc loop says before it starts: the
// shipped DaemonSet gives its container none of what gc needs, so the loop
// there is no reclaim to rely on.
const gcInContainer = "cniforge daemon: warning: the gc loop from a container is no supported reclaim. " +
	"Its DELs run the plugins, which need the host's paths as its conflists name them (/var/lib/cni/networks, /etc/cni/net.d), " +
	"CAP_NET_ADMIN and the iptables/nft binaries they exec; and it proves a pod's netns gone only from the host's mount namespace, " +
	"so from a pid namespace of its own it keeps every attachment. Run gc on the host instead: deploy/systemd's cniforge-gc.timer"
