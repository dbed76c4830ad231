package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/cniforge/plugins/pkg/plugin"
)

// daemon is the node image's command (scripts/image, deploy/): install
// the plugins into --dir (the host's /opt/cni/bin, mounted into the
// DaemonSet's container), then stay up until SIGTERM or SIGINT, so that
// the DaemonSet's pod reads Running and a new image version, rolled out,
// installs itself over the old one. A failed install exits 1: the pod
// restarts and tries again, and the node's runtime keeps the plugins it
// had (install replaces each file whole, never half).
//
// It reclaims nothing. `-- gc ... --every D` after its own flags still
// runs that loop instead of only waiting (as earlier releases documented),
// but says first what it cannot do from a container (gcInContainer): the
// reclaim is the systemd timer in deploy/systemd, run on the host.
func daemon(args []string, plugins []plugin.Plugin, stdout, stderr io.Writer) int {
	return daemonUntil(signalContext(), args, plugins, stdout, stderr)
}

// gcInContainer is what the daemon's gc loop says before it starts: the
// shipped DaemonSet gives its container none of what gc needs, so the loop
// there is no reclaim to rely on.
const gcInContainer = "cniforge daemon: warning: the gc loop from a container is no supported reclaim. " +
	"Its DELs run the plugins, which need the host's paths as its conflists name them (/var/lib/cni/networks, /etc/cni/net.d), " +
	"CAP_NET_ADMIN and the iptables/nft binaries they exec; and it proves a pod's netns gone only from the host's mount namespace, " +
	"so from a pid namespace of its own it keeps every attachment. Run gc on the host instead: deploy/systemd's cniforge-gc.timer"

func signalContext() context.Context {
	ctx, _ := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	return ctx
}

func daemonUntil(ctx context.Context, args []string, plugins []plugin.Plugin, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("cniforge daemon", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("dir", "/host/opt/cni/bin", "the host's plugin directory, as mounted in this container")
	force := fl.Bool("force", false, "replace files that are not cniforge's (upstream's plugins, say)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	then := fl.Args()
	if len(then) > 0 && (then[0] != "gc" || !slices.ContainsFunc(then, func(a string) bool {
		return a == "--every" || strings.HasPrefix(a, "--every=")
	})) {
		fmt.Fprintf(stderr, "cniforge daemon: after its flags, only `gc ... --every DURATION` (the reclaim loop), not %q\n", strings.Join(then, " "))
		return 2
	}
	inst := []string{"--dir", *dir}
	if *force {
		inst = append(inst, "--force")
	}
	if rc := install(inst, plugins, stdout, stderr); rc != 0 {
		return rc
	}
	if len(then) > 0 {
		fmt.Fprintln(stderr, gcInContainer)
		fmt.Fprintf(stdout, "cniforge daemon: %s installed into %s; running cniforge %s until SIGTERM\n", plugin.SuiteVersion(), *dir, strings.Join(then, " "))
		return gc(then[1:], stdout, stderr)
	}
	fmt.Fprintf(stdout, "cniforge daemon: %s installed into %s; waiting for SIGTERM\n", plugin.SuiteVersion(), *dir)
	<-ctx.Done()
	fmt.Fprintln(stdout, "cniforge daemon: stopping; the installed plugins stay")
	_ = os.Stdout.Sync() // best effort: the log line is all that is left to write
	return 0
}
