package hostlocal

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The index answers "which addresses does (containerID, ifname) hold"
// without reading every reservation file, which is what makes upstream's
// ADD/DEL/CHECK cost grow with the number of pods. It is a cache of the
// per-address files, never the authority: a reservation exists exactly when
// its per-address file does.
//
//	.cniforge/stamp        identity of the network folder when the index was last right
//	.cniforge/by-id/<hash> one file per (containerID, ifname): its addresses
//	.cniforge/tmp.*        temp files on their way to a link or rename
//
// Staleness: the stamp records the network folder's inode, mtime, ctime and
// size, taken after our own changes. Anything else that adds or removes a
// reservation (an upstream plugin during a switch of suites, an admin, a
// crash of ours midway) changes the folder's mtime, so the stamp no longer
// matches and the index is rebuilt from the per-address files. Since Linux
// 6.13 a directory whose timestamps were read (we stat it for the stamp)
// gets a fine-grained timestamp on its next change, so two changes inside
// one clock tick still differ. Before each change of ours the stamp is
// removed, so a crash midway leaves no stamp and forces a rebuild.
//
// Upstream walks the network folder recursively and compares each file's
// whole content (trimmed) with "<id>\r\n<ifname>" or "<id>"; every file we
// keep here starts with indexHeader, which holds spaces no container ID can
// have, so upstream never mistakes one for a reservation.
const (
	indexHeader = "# cniforge host-local index v1"
	stampName   = "stamp"
	byIDName    = "by-id"
)

type index struct {
	s      *store
	legacy bool // some reservation has an old upstream (ID-only) owner
	// dirty: the stamp is removed and must be rewritten by commit.
	dirty bool
}

// loadIndex returns the index, rebuilding it from the per-address files
// when its stamp does not match the network folder.
func (s *store) loadIndex() (*index, error) {
	stamp, err := s.dirStamp()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(s.meta, stampName))
	if err == nil {
		lines := strings.Split(string(data), "\n")
		if len(lines) >= 3 && lines[0] == indexHeader && lines[1] == stamp {
			return &index{s: s, legacy: lines[2] == "legacy 1"}, nil
		}
	}
	res, err := s.scan()
	if err != nil {
		return nil, err
	}
	return s.rebuildIndex(res)
}

// dirStamp identifies the network folder's current list of entries.
func (s *store) dirStamp() (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(s.dir, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", s.dir, err)
	}
	return fmt.Sprintf("dir %d %d.%09d %d.%09d %d", st.Ino, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, st.Size), nil
}

// rebuildIndex replaces the index with one made from res.
func (s *store) rebuildIndex(res []reservation) (*index, error) {
	// Also clears temp files a crashed command left: we hold the lock, so
	// no live command owns one.
	if err := os.RemoveAll(s.meta); err != nil {
		return nil, fmt.Errorf("clear index %s: %w", s.meta, err)
	}
	if err := os.MkdirAll(filepath.Join(s.meta, byIDName), 0o700); err != nil {
		return nil, fmt.Errorf("create index %s: %w", s.meta, err)
	}
	ix := &index{s: s, dirty: true}
	type key struct{ id, ifName string }
	groups := map[key][]netip.Addr{}
	for _, r := range res {
		k := key{r.Owner.ID, r.Owner.IfName}
		if r.Owner.Legacy {
			ix.legacy = true
		}
		groups[k] = append(groups[k], r.Addr)
	}
	for k, addrs := range groups {
		if err := ix.put(k.id, k.ifName, addrs); err != nil {
			return nil, err
		}
	}
	if err := ix.commit(); err != nil {
		return nil, err
	}
	return ix, nil
}

// byIDPath names the entry of (id, ifName); ifName "" is the entry of an
// old upstream's ID-only reservations. Hashed, so no ID or name can shape
// the path.
func (ix *index) byIDPath(id, ifName string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + ifName))
	return filepath.Join(ix.s.meta, byIDName, hex.EncodeToString(sum[:16]))
}

// lookup returns the addresses the index records for (id, ifName).
func (ix *index) lookup(id, ifName string) ([]netip.Addr, error) {
	data, err := os.ReadFile(ix.byIDPath(id, ifName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	// header, id, ifname, addresses...; a mismatch (hash collision or a
	// damaged file) is treated as "no entry" here and the caller
	// re-verifies every address against its reservation file anyway.
	if len(lines) < 3 || lines[0] != indexHeader || lines[1] != id || lines[2] != ifName {
		return nil, nil
	}
	var out []netip.Addr
	for _, l := range lines[3:] {
		if a, err := netip.ParseAddr(l); err == nil {
			out = append(out, a)
		}
	}
	return out, nil
}

// lookupOwned is what (id, ifName) holds per the index: its own entry plus,
// when an old upstream left ID-only reservations, those of id.
func (ix *index) lookupOwned(id, ifName string) (exact, legacy []netip.Addr, err error) {
	exact, err = ix.lookup(id, ifName)
	if err != nil || !ix.legacy {
		return exact, nil, err
	}
	legacy, err = ix.lookup(id, "")
	return exact, legacy, err
}

// invalidate removes the stamp before a change, so a crash before commit
// forces the next command to rebuild.
func (ix *index) invalidate() error {
	if ix.dirty {
		return nil
	}
	if err := os.Remove(filepath.Join(ix.s.meta, stampName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("invalidate index: %w", err)
	}
	ix.dirty = true
	return nil
}

// put records addrs as what (id, ifName) holds; none removes the entry.
func (ix *index) put(id, ifName string, addrs []netip.Addr) error {
	path := ix.byIDPath(id, ifName)
	if len(addrs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("update index: %w", err)
		}
		return nil
	}
	var b strings.Builder
	b.WriteString(indexHeader + "\n" + id + "\n" + ifName + "\n")
	for _, a := range addrs {
		b.WriteString(a.String() + "\n")
	}
	if err := ix.s.writeAtomic(path, []byte(b.String())); err != nil {
		return fmt.Errorf("update index: %w", err)
	}
	return nil
}

// commit stamps the index as matching the network folder as it is now.
func (ix *index) commit() error {
	if !ix.dirty {
		return nil
	}
	stamp, err := ix.s.dirStamp()
	if err != nil {
		return err
	}
	legacy := "legacy 0"
	if ix.legacy {
		legacy = "legacy 1"
	}
	if err := ix.s.writeAtomic(filepath.Join(ix.s.meta, stampName), []byte(indexHeader+"\n"+stamp+"\n"+legacy+"\n")); err != nil {
		return fmt.Errorf("stamp index: %w", err)
	}
	ix.dirty = false
	return nil
}
