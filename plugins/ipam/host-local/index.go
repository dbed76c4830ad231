package hostlocal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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

// snapRecord is a snapshot entry as found: where its record and its body
// sit in the file, and the body.
type snapRecord struct {
	recordOff, bodyOff int64
	body               []byte
}

// snapshotEntry finds key in the snapshot: the fanout table gives the run
// of records sharing key's first byte, one read fetches that run. It returns
// nil when the snapshot has no such entry.
func (ix *index) snapshotEntry(key string) (*snapRecord, error) {
	if ix.snap == nil {
		if err := ix.openSnapshot(); err != nil {
			return nil, err
		}
	}
	b := firstByte(key)
	if b < 0 {
		return nil, nil
	}
	fan := make([]byte, 2*fanoutLen)
	if _, err := ix.snap.ReadAt(fan, ix.fanoutStart+int64(b)*fanoutLen); err != nil {
		return nil, fmt.Errorf("read index snapshot: %w", err)
	}
	lo, err1 := strconv.Atoi(string(fan[:fanoutLen-1]))
	hi, err2 := strconv.Atoi(string(fan[fanoutLen : 2*fanoutLen-1]))
	if err := errors.Join(err1, err2); err != nil || lo > hi || hi > ix.snapCount {
		return nil, fmt.Errorf("%w: fanout", errDamagedSnapshot)
	}
	if lo == hi {
		return nil, nil
	}
	runOff := ix.snapStart + int64(lo)*recordLen
	run := make([]byte, (hi-lo)*recordLen)
	if _, err := ix.snap.ReadAt(run, runOff); err != nil {
		return nil, fmt.Errorf("read index snapshot: %w", err)
	}
	for i := 0; i < hi-lo; i++ {
		rec := run[i*recordLen : (i+1)*recordLen]
		if string(rec[:keyLen]) != key {
			continue
		}
		off, err1 := strconv.ParseInt(string(rec[keyLen+1:keyLen+13]), 10, 64)
		n, err2 := strconv.Atoi(string(rec[keyLen+14 : keyLen+22]))
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%w: record: %w", errDamagedSnapshot, err)
		}
		// Written by rebuildIndex, a body lies after the records and is
		// never empty; anything else (a negative length panicked in make:
		// FuzzHostLocalState) is damage.
		if off < ix.snapStart+int64(ix.snapCount)*recordLen || n <= 0 {
			return nil, fmt.Errorf("%w: record %s at %d length %d", errDamagedSnapshot, key, off, n)
		}
		body := make([]byte, n)
		if _, err := ix.snap.ReadAt(body, off); err != nil {
			return nil, fmt.Errorf("read index snapshot: %w", err)
		}
		return &snapRecord{recordOff: runOff + int64(i)*recordLen, bodyOff: off, body: body}, nil
	}
	return nil, nil
}

// errDamagedSnapshot marks a snapshot that does not read as rebuildIndex
// wrote it.
var errDamagedSnapshot = errors.New("read index snapshot: damaged")

// snapshotEntryOrRebuild is snapshotEntry, except that a snapshot damaged
// behind our back (the stamp cannot see inside .cniforge) is rebuilt from
// the reservation files and read again, as loadIndex rebuilds one whose
// header is damaged: a damaged index must not fail every DEL.
func (ix *index) snapshotEntryOrRebuild(key string) (*snapRecord, error) {
	rec, err := ix.snapshotEntry(key)
	if !errors.Is(err, errDamagedSnapshot) {
		return rec, err
	}
	res, err := ix.s.scan()
	if err != nil {
		return nil, err
	}
	fresh, err := ix.s.rebuildIndex(res)
	if err != nil {
		return nil, err
	}
	// Callers hold ix: it becomes the rebuilt index.
	*ix = *fresh
	ix.s.ix = ix
	return ix.snapshotEntry(key)
}

// eraseSnapshotEntry overwrites rec in place so that the snapshot no
// longer names its attachment: the key (bar its first byte, which keeps the
// record in its fanout run) becomes dashes, which no key equals, and the
// body, holding the container ID and ifname, becomes the header line and
// dashes. Sizes and offsets stay, so no other record moves and the
// snapshot is not rewritten: releasing costs the same with 4000
// attachments as with one. Call invalidate first: a crash between the two
// writes leaves no stamp, so the next command rebuilds.
func (ix *index) eraseSnapshotEntry(rec *snapRecord) error {
	path := filepath.Join(ix.s.meta, snapshotName)
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("update index: %w", err)
	}
	erased := []byte(indexHeader + "\n")
	if len(rec.body) > len(erased) {
		erased = append(erased, bytes.Repeat([]byte("-"), len(rec.body)-len(erased)-1)...)
		erased = append(erased, '\n')
	} else {
		erased = bytes.Repeat([]byte("-"), len(rec.body)) // never: a body starts with the header
	}
	_, err1 := f.WriteAt(erased, rec.bodyOff)
	_, err2 := f.WriteAt(bytes.Repeat([]byte("-"), keyLen-2), rec.recordOff+2)
	if err := errors.Join(err1, err2, f.Close()); err != nil {
		return fmt.Errorf("update index %s: %w", path, err)
	}
	return nil
}

// firstByte is the value of a key's first two hex digits, -1 if not hex.
func firstByte(key string) int {
	v, err := strconv.ParseUint(key[:2], 16, 8)
	if err != nil {
		return -1
	}
	return int(v)
}

func (ix *index) openSnapshot() error {
	f, err := os.Open(filepath.Join(ix.s.meta, snapshotName))
	if err != nil {
		return fmt.Errorf("open index snapshot: %w", err)
	}
	head := make([]byte, len(indexHeader)+64)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return fmt.Errorf("read index snapshot: %w", err)
	}
	lines := strings.SplitN(string(head[:n]), "\n", 3)
	count := -1
	if len(lines) == 3 && lines[0] == indexHeader {
		if c, ok := strings.CutPrefix(lines[1], "snapshot "); ok {
			if v, err := strconv.Atoi(c); err == nil {
				count = v
			}
		}
	}
	if count < 0 {
		f.Close()
		return fmt.Errorf("%w: header", errDamagedSnapshot)
	}
	ix.snap, ix.snapCount = f, count
	ix.fanoutStart = int64(len(lines[0]) + 1 + len(lines[1]) + 1)
	ix.snapStart = ix.fanoutStart + fanoutLines*fanoutLen
	return nil
}

func (ix *index) closeSnapshot() {
	if ix.snap != nil {
		ix.snap.Close() // read-only: nothing to lose
		ix.snap = nil
	}
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
