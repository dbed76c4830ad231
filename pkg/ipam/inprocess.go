package ipam

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/plugin"
)

// delegateExec is how the IPAM plugin is run: found on CNI_PATH by
// invoke, then run in this process when its binary is this executable (the
// multicall binary linked as host-local, say), else exec'd.
var delegateExec invoke.Exec = &sameBinaryExec{
	Exec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}},
	self: selfID,
}

// sameBinaryExec is an invoke.Exec that runs a delegate in-process when the
// path invoke found on CNI_PATH is the running executable (same device and
// inode once links are resolved) and names a registered plugin that allows
// it (plugin.Plugin.InProcess). Any other binary, even of the same name,
// is exec'd by the embedded Exec.
type sameBinaryExec struct {
	invoke.Exec
	self func() (fileID, error)
	// ran, when set, is told each plugin run in-process (tests).
	ran func(name string)
}

type fileID struct{ dev, ino uint64 }

func (e *sameBinaryExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	if p, ok := e.inProcess(path); ok {
		if e.ran != nil {
			e.ran(p.Name)
		}
		return p.RunInProcess(environ, stdin, os.Stderr)
	}
	if pre := take(ctx, path, environ); pre != nil {
		return pre.run(ctx, stdin)
	}
	return e.Exec.ExecPlugin(ctx, path, stdin, environ)
}

// inProcess returns the plugin to run in-process for the binary at path.
// Any doubt (a stat failing, an unknown name) means exec.
func (e *sameBinaryExec) inProcess(path string) (plugin.Plugin, bool) {
	p, ok := plugin.Lookup(filepath.Base(path))
	if !ok || !p.InProcess {
		return plugin.Plugin{}, false
	}
	self, err := e.self()
	if err != nil {
		return plugin.Plugin{}, false
	}
	id, err := statID(path) // follows symlinks, as exec does
	if err != nil || id != self {
		return plugin.Plugin{}, false
	}
	return p, true
}

var selfID = sync.OnceValues(func() (fileID, error) {
	// /proc/self/exe names the file this process runs even after it was
	// renamed over: an upgraded binary on CNI_PATH is then another file,
	// and is exec'd.
	return statID("/proc/self/exe")
})

func statID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}, fmt.Errorf("stat %s: %w", path, err)
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, nil
}
