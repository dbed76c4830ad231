package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// hostView says whether a missing file can prove anything: only in the
// mount namespace the runtime made its netns files in, the host's. The
// tool must show it looks there (probeHostView); when it cannot, every
// missing netns file is kept and reported.
type hostView struct {
	ok  bool
	why string // when not ok
}

// The namespace links probeHostView reads.
const selfMntNS, selfPidNS, initMntNS = "/proc/self/ns/mnt", "/proc/self/ns/pid", "/proc/1/ns/mnt"

// Inodes the kernel gives its initial namespaces: the pid namespace's
// (PROC_PID_INIT_INO) since namespaces had inodes, the mount namespace's
// (MNT_NS_INIT_INO) since Linux 6.18; on older kernels no mount namespace
// has that inode.
const (
	initialPidNSIno = 0xEFFFFFFC
	initialMntNSIno = 0xEFFFFFF8
)

// nsLink is what stat and statfs say of a /proc/<pid>/ns/<type> link.
type nsLink struct {
	dev, ino uint64
	nsfs     bool // the link leads to a namespace (nsfs), not a stand-in file
	err      error
}

func statNS(path string) nsLink {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsLink{err: err}
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return nsLink{err: err}
	}
	return nsLink{dev: uint64(st.Dev), ino: st.Ino, nsfs: fs.Type == unix.NSFS_MAGIC} // Dev is uint32 on mips64le
}

func probeHostView() hostView {
	return decideHostView(statNS(selfMntNS), statNS(selfPidNS), func() nsLink { return statNS(initMntNS) })
}

// decideHostView: this is the host's mount namespace when it is the
// kernel's initial one (told by its inode, Linux 6.18+), or when this
// process is in the initial pid namespace and shares pid 1's mount
// namespace: there pid 1 is the host's init. In a container with its own
// pid namespace (a DaemonSet's, `unshare -p`), pid 1 is that container's
// init, and sharing its mount namespace proves nothing about the host's.
func decideHostView(selfMnt, selfPid nsLink, initMnt func() nsLink) hostView {
	const cannot = "cannot tell this mount namespace from the host's"
	if selfMnt.err != nil {
		return hostView{why: fmt.Sprintf("%s: %v", cannot, selfMnt.err)}
	}
	if selfMnt.nsfs && selfMnt.ino == initialMntNSIno {
		return hostView{ok: true}
	}
	switch {
	case selfPid.err != nil:
		return hostView{why: fmt.Sprintf("%s: %v", cannot, selfPid.err)}
	case !selfPid.nsfs || selfPid.ino != initialPidNSIno:
		return hostView{why: "run in a pid namespace of its own (a container's?), whose pid 1 is not the host's init: " +
			"it cannot show it sees the host's mount namespace, so a missing netns file proves nothing here"}
	}
	// Reading pid 1's namespace links takes ptrace rights over it: root
	// without some of pid 1's capabilities is refused (EACCES).
	init := initMnt()
	if init.err != nil {
		return hostView{why: fmt.Sprintf("%s: %v", cannot, init.err)}
	}
	if !selfMnt.nsfs || !init.nsfs || selfMnt.dev != init.dev || selfMnt.ino != init.ino {
		return hostView{why: "not run in the host's mount namespace (pid 1's): a missing netns file proves nothing here"}
	}
	return hostView{ok: true}
}

// netnsState says whether the netns at path still exists, and when that
// cannot be decided, why. Only "gone" lets gc DEL the attachment, and it
// takes proof:
//   - a path that names a namespace (nsfs) is live;
//   - a path that exists but is no nsfs mount is undecidable: a netns file
//     whose bind mount this mount namespace does not see (a container
//     without mount propagation, a rootless Podman netns seen from the
//     host) is a plain empty file;
//   - a stat error other than ENOENT is undecidable;
//   - ENOENT is proof only in the host's mount namespace (hostView), with
//     the folder that held the file present and readable: in a mount
//     namespace with a tmpfs over /run/netns, or without the host's
//     /run/netns mounted at all, every path is missing;
//   - a /proc/<pid>/ns/net path is never proof of absence: a gone process
//     says nothing of the namespace, which the pod's other processes may
//     hold, and in another pid namespace the number names someone else.
func netnsState(path string, view hostView) (state, why string) {
	if path == "" {
		return nsUnknown, "no netns recorded"
	}
	var fsst unix.Statfs_t
	err := unix.Statfs(path, &fsst)
	isProc := strings.HasPrefix(filepath.Clean(path), "/proc/")
	switch {
	case err == nil && fsst.Type == unix.NSFS_MAGIC:
		return nsLive, ""
	case err == nil:
		return nsUnknown, "a file that is not a namespace mount (a mount this namespace does not see?)"
	case isProc:
		return nsUnknown, fmt.Sprintf("%v: a process gone says nothing of its namespace", err)
	case !errors.Is(err, unix.ENOENT):
		return nsUnknown, err.Error()
	case !view.ok:
		return nsUnknown, view.why
	}
	dir := filepath.Dir(path)
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		_, err = f.Readdirnames(1)
		f.Close()
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		return nsUnknown, fmt.Sprintf("folder %s: %v", dir, err)
	}
	return nsGone, ""
}
