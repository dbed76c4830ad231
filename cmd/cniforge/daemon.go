package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "cniforge daemon: unexpected argument %q\n", fl.Arg(0))
		return 2
	}
	inst := []string{"--dir", *dir}
	if *force {
		inst = append(inst, "--force")
	}
	if rc := install(inst, plugins, stdout, stderr); rc != 0 {
		return rc
	}
	fmt.Fprintf(stdout, "cniforge daemon: %s installed into %s; waiting for SIGTERM\n", plugin.SuiteVersion(), *dir)
	<-ctx.Done()
	fmt.Fprintln(stdout, "cniforge daemon: stopping; the installed plugins stay")
	_ = os.Stdout.Sync() // best effort: the log line is all that is left to write
	return 0
}
