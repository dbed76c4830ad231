package hostlocal

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/filelock"
)

// The on-disk layout is upstream host-local's, so a node can switch suites
// with pods running:
//
//	<dataDir>/<network>/<ip>                  "<containerID>\r\n<ifname>" (older upstream: "<containerID>")
//	<dataDir>/<network>/last_reserved_ip.<n>  the last address reserved in range set n
//	<dataDir>/<network>/lock                  flock'ed for the whole command
//
// Our index lives in <network>/.cniforge/ (see index.go; snapshot.go and
// stamp.go for its snapshot file and its staleness stamp).
const (
	lockName       = "lock"
	lastIPPrefix   = "last_reserved_ip."
	metaName       = ".cniforge"
	filePerm       = 0o600
	dirPerm        = 0o755
	ownerSeparator = "\r\n"
)

// owner is who holds a reservation. Legacy owners come from files an older
// upstream wrote (the container ID alone); they match any ifname.
type owner struct {
	ID     string
	IfName string
	Legacy bool
}

func (o owner) content() []byte { return []byte(o.ID + ownerSeparator + o.IfName) }

// parseOwner reads a reservation file the way upstream compares it: the
// whole content, surrounding whitespace trimmed.
func parseOwner(data []byte) owner {
	s := strings.TrimSpace(string(data))
	if id, ifName, ok := strings.Cut(s, ownerSeparator); ok {
		return owner{ID: id, IfName: ifName}
	}
	return owner{ID: s, Legacy: true}
}

// holds reports whether o is the owner of (id, ifName).
func (o owner) holds(id, ifName string) bool {
	if o.Legacy {
		return o.ID == id
	}
	return o.ID == id && o.IfName == ifName
}

// store is one network's folder, locked for the life of a command.
type store struct {
	dir  string // <dataDir>/<network>
	meta string // <dir>/.cniforge
	lock *os.File
	ix   *index // loaded by loadIndex

	afterStep func(step string)                        // see options
	statDir   func(path string, st *unix.Stat_t) error // see options; nil = stat(2)
}

// step marks the end of a step that changed the disk (for crash tests).
func (s *store) step(name string) {
	if s.afterStep != nil {
		s.afterStep(name)
	}
}

// errNoStore is returned by openStore(create=false) when the network has no
// folder: nothing was ever reserved in it.
var errNoStore = errors.New("network folder does not exist")

// openStore opens and locks the network's folder, creating it when create
// is set. The lock is exclusive and held until close, as upstream holds it,
// so upstream and cniforge commands on one node serialise on the same file.
func openStore(dataDir, network string, create bool) (*store, error) {
	dir := filepath.Join(dataDir, network)
	if create {
		if err := os.MkdirAll(dir, dirPerm); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	} else if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, errNoStore
	}
	f, err := filelock.Lock(filepath.Join(dir, lockName), filePerm)
	if err != nil {
		return nil, err
	}
	return &store{dir: dir, meta: filepath.Join(dir, metaName), lock: f}, nil
}

// close releases the lock (closing the file drops the flock).
func (s *store) close() error {
	if s.ix != nil {
		s.ix.closeSnapshot()
	}
	return s.lock.Close()
}

func (s *store) path(a netip.Addr) string { return filepath.Join(s.dir, a.String()) }

// readOwner reads the reservation of a; fs.ErrNotExist when it is free.
func (s *store) readOwner(a netip.Addr) (owner, error) {
	data, err := os.ReadFile(s.path(a))
	if err != nil {
		return owner{}, err
	}
	return parseOwner(data), nil
}

// isReserved reports whether a has a reservation file.
func (s *store) isReserved(a netip.Addr) (bool, error) {
	_, err := os.Lstat(s.path(a))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// claimer writes a reservation's content once into a temp file and then
// tries addresses with link(2): link fails with EEXIST when the address is
// taken, and when it succeeds the file appears with its full content, so no
// reader (nor a crash) ever sees an empty or half-written reservation.
type claimer struct {
	s    *store
	temp string
}

func (s *store) newClaimer(o owner) (*claimer, error) {
	temp, err := s.writeTemp(o.content())
	if err != nil {
		return nil, err
	}
	return &claimer{s: s, temp: temp}, nil
}

// claim reserves a; false (and no error) when someone holds it already.
func (c *claimer) claim(a netip.Addr) (bool, error) {
	err := os.Link(c.temp, c.s.path(a))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	return false, fmt.Errorf("reserve %s in %s: %w", a, c.s.dir, err)
}

func (c *claimer) close() error {
	if err := os.Remove(c.temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", c.temp, err)
	}
	return nil
}

// release removes a's reservation if o holds it. A reservation someone else
// holds, or none at all, is left alone: the caller's view was stale.
func (s *store) release(a netip.Addr, id, ifName string) (bool, error) {
	o, err := s.readOwner(a)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read reservation %s: %w", s.path(a), err)
	}
	if !o.holds(id, ifName) {
		return false, nil
	}
	return true, s.remove(a)
}

func (s *store) remove(a netip.Addr) error {
	if err := os.Remove(s.path(a)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release %s: %w", s.path(a), err)
	}
	return nil
}

// lastReserved reads last_reserved_ip.<set>; the zero Addr when there is
// none or it cannot be read (round-robin then starts over, as upstream does).
func (s *store) lastReserved(set int) netip.Addr {
	data, err := os.ReadFile(filepath.Join(s.dir, lastIPPrefix+strconv.Itoa(set)))
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(data)))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// setLastReserved records a as the last address reserved in set. Upstream
// reads the file with net.ParseIP on the raw content, so no newline. It is
// the round-robin cursor, not an ownership record: a torn write after a
// crash only moves where the next search starts, so it is written in place
// (see writeInPlace) rather than renamed over.
func (s *store) setLastReserved(set int, a netip.Addr) error {
	return writeInPlace(filepath.Join(s.dir, lastIPPrefix+strconv.Itoa(set)), []byte(a.String()))
}

// writeInPlace overwrites path with data without truncating it to zero
// first: ext4 (auto_da_alloc) starts writeback on close of a file truncated
// to zero or renamed over another, which costs milliseconds per command on
// a busy disk. Only for files whose torn content is harmless.
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|unix.O_CLOEXEC, filePerm)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt(data, 0)
	if werr == nil {
		werr = f.Truncate(int64(len(data)))
	}
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeTemp writes data into a fresh temp file in the meta folder (same
// file system as the network folder, so it can be linked or renamed there).
func (s *store) writeTemp(data []byte) (string, error) {
	f, err := os.CreateTemp(s.meta, "tmp.")
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(s.meta, 0o700); err == nil {
			f, err = os.CreateTemp(s.meta, "tmp.")
		}
	}
	if err != nil {
		return "", fmt.Errorf("create temp file in %s: %w", s.meta, err)
	}
	name := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(name) // best effort: a leftover temp is cleared by the next rebuild
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return name, nil
}

// reservation is one per-address file found by a scan.
type reservation struct {
	Addr  netip.Addr
	Owner owner
}

// scan reads every reservation file in the network folder: the slow,
// authoritative view the index is rebuilt from. Names that are not an
// address (lock, last_reserved_ip.*, our meta folder, anything else) are
// skipped.
func (s *store) scan() ([]reservation, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s.dir, err)
	}
	var out []reservation
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		a, err := netip.ParseAddr(e.Name())
		if err != nil || a.String() != e.Name() {
			continue // not a reservation: upstream and we name them ip.String()
		}
		data, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read reservation %s: %w", filepath.Join(s.dir, e.Name()), err)
		}
		out = append(out, reservation{Addr: a.Unmap(), Owner: parseOwner(data)})
	}
	return out, nil
}
