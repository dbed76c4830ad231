package hostlocal

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// stampMatches reports whether data, the stamp file's content, is whole
// and records the folder identity stamp, and what it says of legacy owners.
func stampMatches(data []byte, stamp string) (legacy, ok bool) {
	lines := strings.Split(string(data), "\n")
	// A torn stamp (a crash while writing it) lacks its last line.
	if len(lines) == 4 && lines[0] == indexHeader && lines[1] == stamp && lines[3] == "" &&
		(lines[2] == "legacy 0" || lines[2] == "legacy 1") {
		return lines[2] == "legacy 1", true
	}
	return false, false
}

// dirStamp identifies the network folder's current list of entries.
func (s *store) dirStamp() (string, error) {
	stamp, _, err := s.statStamp()
	return stamp, err
}

// statStamp is dirStamp, also returning the mtime the stamp holds.
func (s *store) statStamp() (string, unix.Timespec, error) {
	var st unix.Stat_t
	stat := unix.Stat
	if s.statDir != nil {
		stat = s.statDir
	}
	if err := stat(s.dir, &st); err != nil {
		return "", unix.Timespec{}, fmt.Errorf("stat %s: %w", s.dir, err)
	}
	return fmt.Sprintf("dir %d %d.%09d %d.%09d %d", st.Ino, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, st.Size), st.Mtim, nil
}

// sameSetMtime reports whether got is the mtime markDir set. Filesystems
// store it at their own granularity, truncating (whole seconds on ext4
// with 128-byte inodes), so a shorter fraction of the same second is
// still ours; the second alone already rules out a change by the kernel
// (see markDir).
func sameSetMtime(got, set unix.Timespec) bool {
	return got.Sec == set.Sec && got.Nsec <= set.Nsec
}

// voidStamp makes the stamp in meta fail loadIndex's check by
// overwriting its first byte, in place: the header no longer matches, and
// a one-byte write cannot be torn. Removing the file would do as well, but
// commit would then make a new file, and a new inode is the dearest thing
// a command asks of the file system (ext4 without a journal scans past
// every recently deleted inode for one). No stamp is nothing to void.
func voidStamp(meta string) error {
	f, err := os.OpenFile(filepath.Join(meta, stampName), os.O_WRONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("invalidate index: %w", err)
	}
	_, werr := f.WriteAt([]byte{'-'}, 0)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("invalidate index: %w", err)
	}
	return nil
}

// markDir sets the network folder's mtime to a value the kernel will not
// give it on a later change (see Staleness above). The kernel stamps a
// change with its coarse clock, which lags the time read here by at most a
// tick, so a later change's second is at least now's second minus one: two
// seconds back can never equal it, even where only seconds are stored. The
// random fraction keeps the value unpredictable where nanoseconds are.
// It returns the value set, for commit to compare with what it stats.
func (s *store) markDir() (unix.Timespec, error) {
	sec := time.Now().Unix() - 2
	mtime := unix.NsecToTimespec(sec*int64(time.Second) + rand.Int64N(int64(time.Second)))
	atime := unix.Timespec{Nsec: unix.UTIME_OMIT}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, s.dir, []unix.Timespec{atime, mtime}, 0); err != nil {
		return unix.Timespec{}, fmt.Errorf("set mtime of %s: %w", s.dir, err)
	}
	return mtime, nil
}
