package hostlocal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

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
