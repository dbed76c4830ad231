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
// installs itself over the old one. With `-- gc ... --every D` after its
// own flags it runs that reclaim loop instead of only waiting. A failed install exits 1: the pod
// restarts and tries again, and the node's runtime keeps the plugins it
// had (install replaces each file whole, never half).
func daemon(args []string, plugins []plugin.Plugin, stdout, stderr io.Writer) int {
	return daemonUntil(signalContext(), args, plugins, stdout, stderr)
}

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
		fmt.Fprintf(stdout, "cniforge daemon: %s installed into %s; running cniforge %s until SIGTERM\n", plugin.SuiteVersion(), *dir, strings.Join(then, " "))
		return gc(then[1:], stdout, stderr)
	}
	fmt.Fprintf(stdout, "cniforge daemon: %s installed into %s; waiting for SIGTERM\n", plugin.SuiteVersion(), *dir)
	<-ctx.Done()
	fmt.Fprintln(stdout, "cniforge daemon: stopping; the installed plugins stay")
	_ = os.Stdout.Sync() // best effort: the log line is all that is left to write
	return 0
}
