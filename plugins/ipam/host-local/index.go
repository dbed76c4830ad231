package hostlocal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The index answers "which addresses does (containerID, ifname) hold"
// without reading every reservation file, which is what makes upstream's
// ADD/DEL/CHECK cost grow with the number of pods. It is a cache of the
// per-address files, never the authority: a reservation exists exactly when
// its per-address file does, and every address the index names is checked
// against its file before it is trusted.
//
//	.cniforge/stamp        identity of the network folder when the index was last right
//	.cniforge/snapshot     every attachment's addresses at the last rebuild, sorted by key
//	.cniforge/by-id/<key>  an attachment added or changed since then
//	.cniforge/tmp.*        reservations on their way to a link(2)
//
// A rebuild (reading every reservation file) writes one snapshot file, so
// it costs about what upstream pays on every command; later commands touch
// one small by-id file each and find the rest in the snapshot with three
// small reads (fanout table, the run of records sharing a first byte, the
// entry). Releasing an attachment removes its by-id file and erases its
// snapshot record in place (see eraseSnapshotEntry): after DEL no index
// file names it, and by-id files never outnumber the live attachments, so
// nothing needs compacting.
//
// Staleness: before stamping, commit sets the network folder's mtime
// itself, to a value no later change can give it: two seconds before now,
// with a random fraction (see markDir). The stamp records the folder's
// inode, that mtime, its ctime and its size. Anything else that adds or
// removes a reservation (an upstream plugin during a switch of suites, an
// admin, a crash of ours midway) makes the kernel set the folder's mtime to
// the current time, which is not the value we set, so the stamp no longer
// matches and the index is rebuilt.
//
// Why not simply stamp the timestamps our own last change left: before
// Linux 6.13 a folder's timestamps move once per clock tick (a few ms, or
// whole seconds on ext4 with 128-byte inodes), and an entry more leaves its
// size alone, so a foreign change in the tick of our last change would look
// like no change. The ctime cannot be set and cannot help: utimensat sets
// it to now, which a foreign change in the same tick repeats. It stays in
// the stamp because it costs nothing and catches what the mtime alone
// would not after a wall clock stepped back to within our value's second.
// Before each change of ours the stamp is voided (voidStamp), so a crash
// midway leaves no valid stamp and forces a rebuild; that is also why the
// index files can be written in place.
//
// Upstream walks the network folder recursively and compares each file's
// whole content (trimmed) with "<id>\r\n<ifname>" or "<id>"; every file we
// keep here starts with indexHeader, which holds spaces no container ID can
// have, so upstream never mistakes one for a reservation.
const (
	indexHeader  = "# cniforge host-local index v1"
	stampName    = "stamp"
	snapshotName = "snapshot"
	byIDName     = "by-id"

	keyLen = 32 // hex of 16 bytes of sha256(id \x00 ifname)
	// A snapshot record: "<key> <offset> <length>\n", fixed width so a
	// record's place in the file is computed, not searched for.
	recordLen = keyLen + 1 + 12 + 1 + 8 + 1
	// The fanout table, as in git's pack index: line b ("%08d\n") is how
	// many records have keys whose first byte is < b, so the records of one
	// first byte are found with two small reads, whatever the count.
	fanoutLines = 257
	fanoutLen   = 9
)

type index struct {
	s      *store
	legacy bool // some reservation has an old upstream (ID-only) owner
	// dirty: the stamp is removed and must be rewritten by commit.
	dirty bool
	// unsure: commit saw a change it did not make, which the index may
	// miss; no commit of this command may stamp it.
	unsure bool

	snap        *os.File // opened on first use, closed with the store
	snapCount   int
	fanoutStart int64 // offset of the fanout table
	snapStart   int64 // offset of the first record
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
		if legacy, ok := stampMatches(data, stamp); ok {
			ix := &index{s: s, legacy: legacy}
			// A snapshot removed or damaged behind our back (the folder's
			// stamp cannot see inside .cniforge) means a rebuild, not an error.
			if err := ix.openSnapshot(); err == nil {
				s.ix = ix
				return ix, nil
			}
		}
	}
	res, err := s.scan()
	if err != nil {
		return nil, err
	}
	return s.rebuildIndex(res)
}

// rebuildIndex replaces the index with one made from res.
func (s *store) rebuildIndex(res []reservation) (*index, error) {
	if s.ix != nil {
		s.ix.closeSnapshot()
	}
	// Also clears temp files a crashed command left: we hold the lock, so
	// no live command owns one.
	if err := os.RemoveAll(s.meta); err != nil {
		return nil, fmt.Errorf("clear index %s: %w", s.meta, err)
	}
	if err := os.MkdirAll(filepath.Join(s.meta, byIDName), 0o700); err != nil {
		return nil, fmt.Errorf("create index %s: %w", s.meta, err)
	}
	ix := &index{s: s, dirty: true}
	s.ix = ix
	type entry struct {
		key, id, ifName string
		addrs           []netip.Addr
	}
	byKey := map[string]*entry{}
	for _, r := range res {
		if r.Owner.Legacy {
			ix.legacy = true
		}
		k := indexKey(r.Owner.ID, r.Owner.IfName)
		e := byKey[k]
		if e == nil {
			e = &entry{key: k, id: r.Owner.ID, ifName: r.Owner.IfName}
			byKey[k] = e
		}
		e.addrs = append(e.addrs, r.Addr)
	}
	entries := make([]*entry, 0, len(byKey))
	for _, e := range byKey {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b *entry) int { return strings.Compare(a.key, b.key) })

	head := fmt.Sprintf("%s\nsnapshot %d\n", indexHeader, len(entries))
	var fanout, records, data bytes.Buffer
	next := 0
	for b := 0; b < fanoutLines; b++ {
		for next < len(entries) && firstByte(entries[next].key) < b {
			next++
		}
		fmt.Fprintf(&fanout, "%08d\n", next)
	}
	head += fanout.String()
	dataStart := int64(len(head) + len(entries)*recordLen)
	for _, e := range entries {
		body := entryBody(e.id, e.ifName, e.addrs)
		fmt.Fprintf(&records, "%s %012d %08d\n", e.key, dataStart+int64(data.Len()), len(body))
		data.WriteString(body)
	}
	if err := writeInPlace(filepath.Join(s.meta, snapshotName), []byte(head+records.String()+data.String())); err != nil {
		return nil, fmt.Errorf("write index: %w", err)
	}
	if err := ix.commit(); err != nil {
		return nil, err
	}
	return ix, nil
}

// indexKey names the entry of (id, ifName); ifName "" is the entry of an
// old upstream's ID-only reservations. Hashed, so no ID or name can shape
// a path.
func indexKey(id, ifName string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + ifName))
	return hex.EncodeToString(sum[:keyLen/2])
}

// entryBody is an entry as stored: header, id, ifname, one address a line.
func entryBody(id, ifName string, addrs []netip.Addr) string {
	var b strings.Builder
	b.WriteString(indexHeader + "\n" + id + "\n" + ifName + "\n")
	for _, a := range addrs {
		b.WriteString(a.String() + "\n")
	}
	return b.String()
}

// parseEntry reads an entry; ok is false when it is not (id, ifName)'s (a
// hash collision, or a damaged file: the caller then treats it as absent and
// every address is verified against its reservation file anyway).
func parseEntry(data []byte, id, ifName string) (addrs []netip.Addr, ok bool) {
	lines := strings.Split(string(data), "\n")
	if len(lines) < 4 || lines[0] != indexHeader || lines[1] != id || lines[2] != ifName || lines[len(lines)-1] != "" {
		return nil, false
	}
	for _, l := range lines[3 : len(lines)-1] {
		if a, err := netip.ParseAddr(l); err == nil {
			addrs = append(addrs, a)
		}
	}
	return addrs, true
}

func (ix *index) byIDPath(key string) string { return filepath.Join(ix.s.meta, byIDName, key) }

// lookup returns the addresses the index records for (id, ifName): its
// by-id file when it changed since the snapshot, else the snapshot's entry.
// found reports that the index has an entry for it at all, even one
// listing no address: DEL must remove such an entry too.
func (ix *index) lookup(id, ifName string) (addrs []netip.Addr, found bool, err error) {
	key := indexKey(id, ifName)
	data, err := os.ReadFile(ix.byIDPath(key))
	if err == nil {
		addrs, _ := parseEntry(data, id, ifName)
		return addrs, true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("read index: %w", err)
	}
	rec, err := ix.snapshotEntryOrRebuild(key)
	if err != nil || rec == nil {
		return nil, false, err
	}
	addrs, ok := parseEntry(rec.body, id, ifName)
	return addrs, ok, nil
}

// lookupOwned is what (id, ifName) holds per the index: its own entry plus,
// when an old upstream left ID-only reservations, those of id. found is
// lookup's, for either entry.
func (ix *index) lookupOwned(id, ifName string) (exact, legacy []netip.Addr, found bool, err error) {
	exact, found, err = ix.lookup(id, ifName)
	if err != nil || !ix.legacy {
		return exact, nil, found, err
	}
	legacy, foundLegacy, err := ix.lookup(id, "")
	return exact, legacy, found || foundLegacy, err
}

// invalidate voids the stamp before a change, so a crash before commit
// forces the next command to rebuild.
func (ix *index) invalidate() error {
	if ix.dirty {
		return nil
	}
	if err := voidStamp(ix.s.meta); err != nil {
		return err
	}
	ix.dirty = true
	ix.s.step("invalidate")
	return nil
}

// put records addrs as what (id, ifName) holds. None releases the entry:
// its by-id file goes, and so does its record in the snapshot (erased in
// place), so no file of the index names a released attachment (issue 7).
// Call invalidate first.
func (ix *index) put(id, ifName string, addrs []netip.Addr) error {
	key := indexKey(id, ifName)
	path := ix.byIDPath(key)
	if len(addrs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("update index: %w", err)
		}
		rec, err := ix.snapshotEntryOrRebuild(key)
		if err != nil {
			return err
		}
		if rec == nil {
			return nil
		}
		if _, ok := parseEntry(rec.body, id, ifName); !ok {
			return nil // another attachment's, under a colliding key
		}
		return ix.eraseSnapshotEntry(rec)
	}
	body := []byte(entryBody(id, ifName, addrs))
	err := writeInPlace(path, body)
	if errors.Is(err, fs.ErrNotExist) {
		// by-id/ was removed by hand; what it held is lost, but every
		// address is verified against its file and GC rebuilds from them.
		if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
			err = writeInPlace(path, body)
		}
	}
	if err != nil {
		return fmt.Errorf("update index: %w", err)
	}
	return nil
}

// commit stamps the index as matching the network folder as it is now.
func (ix *index) commit() error {
	if !ix.dirty || ix.unsure {
		return nil
	}
	set, err := ix.s.markDir()
	if err != nil {
		// Without our own mtime on the folder a stamp could hide a foreign
		// change; with no stamp every command rebuilds: slower, still right.
		return nil
	}
	stamp, mtime, err := ix.s.statStamp()
	if err != nil {
		return err
	}
	if !sameSetMtime(mtime, set) {
		// A writer that ignores the lock (an admin) changed the folder
		// after markDir: stamping now would record its change as ours and
		// hide it. Leave no stamp, so the next command rebuilds.
		ix.unsure = true
		return nil
	}
	legacy := "legacy 0"
	if ix.legacy {
		legacy = "legacy 1"
	}
	// Written over the stamp invalidate voided (or as a new file). A write
	// cut short leaves the void mark, the old tail or the old folder
	// identity in it, each of which loadIndex refuses.
	if err := writeInPlace(filepath.Join(ix.s.meta, stampName), []byte(indexHeader+"\n"+stamp+"\n"+legacy+"\n")); err != nil {
		return fmt.Errorf("stamp index: %w", err)
	}
	ix.dirty = false
	return nil
}
