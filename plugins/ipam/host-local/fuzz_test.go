package hostlocal

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
)

// FuzzHostLocalConfig: any stdin and CNI_ARGS parse as every verb parses
// them (ADD's parseAddConfig, the others' parseConfig, CHECK's prevResult,
// GC's list) without a panic or a hang, the same way twice, or fail with a
// CNI error. The seeds in testdata/fuzz are the configs the tests use.
func FuzzHostLocalConfig(f *testing.F) {
	testutil.FuzzConfig(f, func(stdin []byte, cniArgs string) (any, error) {
		add, err := parseAddConfig(stdin, cniArgs)
		if err != nil {
			return nil, err
		}
		conf, err := parseConfig(stdin)
		if err != nil {
			return nil, fmt.Errorf("ADD accepted what the other verbs refuse: %w", err)
		}
		prev, err := result.PrevResult(stdin)
		if err != nil {
			return nil, err
		}
		valid, err := result.GCAttachments(stdin)
		if err != nil {
			return nil, err
		}
		return []any{add, conf, prev, valid}, nil
	}, `{"cniVersion": "1.1.0", "name": "fuzz", "type": "host-local", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.1.0.0/24"}]]}}`)
}

// fuzzStateConf is the network every FuzzHostLocalState run works on, in
// dataDir: two range sets, so both families and both last_reserved files
// are read.
func fuzzStateConf(t testing.TB, dataDir string) *Config {
	t.Helper()
	c, err := parseAddConfig([]byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "fuzz", "type": "host-local",
		"ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.1.0.0/29"}], [{"subnet": "fd00::/125"}]]}}`, dataDir)), "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The attachment every run adds, checks and deletes, and one that the
// seeds hold besides it.
const (
	fuzzID, fuzzIf     = "fuzz-container", "eth0"
	otherID, otherIfNm = "other-container", "net1"
)

// FuzzHostLocalState: whatever host-local finds in its network folder (a
// reservation file, last_reserved_ip, and the index: its snapshot and a
// by-id entry, with a stamp that makes them trusted), ADD, CHECK, DEL and
// GC neither panic nor hang, and fail, if they fail, with a CNI error.
// Everything lives in t.TempDir(). The seeds are the files a real ADD of
// two attachments leaves.
func FuzzHostLocalState(f *testing.F) {
	seed := f.TempDir()
	c := fuzzStateConf(f, seed)
	for _, id := range []string{otherID, fuzzID} {
		if _, err := add(c, id, fuzzIf, quietLog); err != nil {
			f.Fatal(err)
		}
	}
	dir := filepath.Join(seed, c.Name)
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	owner := read("10.1.0.2")
	last := read(lastIPPrefix + "0")
	snapshot := read(filepath.Join(metaName, snapshotName))
	byID := []byte(entryBody(fuzzID, fuzzIf, nil))
	f.Add(owner, last, snapshot, byID, false)
	f.Add(owner, last, snapshot, []byte(nil), false)
	f.Add([]byte(otherID), []byte("fd00::3"), snapshot, byID, true)

	f.Fuzz(func(t *testing.T, owner, last, snapshot, byID []byte, legacy bool) {
		dataDir := t.TempDir()
		c := fuzzStateConf(t, dataDir)
		writeFuzzState(t, filepath.Join(dataDir, c.Name), owner, last, snapshot, byID, legacy)
		for _, verb := range []struct {
			name string
			fn   func() error
		}{
			{"CHECK", func() error { return check(c, fuzzID, fuzzIf, nil) }},
			{"ADD", func() error { _, err := add(c, fuzzID, fuzzIf, quietLog); return err }},
			{"DEL", func() error { return del(c, fuzzID, fuzzIf) }},
			{"GC", func() error { return gc(c, nil) }},
			{"STATUS", func() error { return status(c) }},
		} {
			var err error
			testutil.Bounded(t, verb.name, func() { err = verb.fn() })
			if verb.name == "CHECK" {
				continue // fails whenever the attachment holds nothing: any error is fine
			}
			testutil.CheckCNIErrorAllow999(t, verb.name, err)
		}
	})
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// writeFuzzState fills the network folder dir: the reservation file of
// 10.1.0.2 and of fd00::2 (both with owner), last_reserved_ip.0 and .1
// (last), the snapshot, the by-id entry of (fuzzID, fuzzIf) (unless byID is
// empty), and a stamp naming the folder as it now is, so that the index
// is read rather than rebuilt.
func writeFuzzState(t *testing.T, dir string, owner, last, snapshot, byID []byte, legacy bool) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	meta := filepath.Join(dir, metaName)
	must(os.MkdirAll(filepath.Join(meta, byIDName), 0o700))
	for _, name := range []string{lockName, "10.1.0.2", "fd00::2", lastIPPrefix + "0", lastIPPrefix + "1"} {
		data := owner
		switch name {
		case lockName:
			data = nil
		case lastIPPrefix + "0", lastIPPrefix + "1":
			data = last
		}
		must(os.WriteFile(filepath.Join(dir, name), data, filePerm))
	}
	must(os.WriteFile(filepath.Join(meta, snapshotName), snapshot, filePerm))
	if len(byID) > 0 {
		must(os.WriteFile(filepath.Join(meta, byIDName, indexKey(fuzzID, fuzzIf)), byID, filePerm))
	}
	s := &store{dir: dir, meta: meta}
	stamp, err := s.dirStamp()
	must(err)
	l := "legacy 0"
	if legacy {
		l = "legacy 1"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%s\n%s\n", indexHeader, stamp, l)
	must(os.WriteFile(filepath.Join(meta, stampName), b.Bytes(), filePerm))
}

// FuzzHostLocalResolvConf: any resolv.conf (the file "resolvConf" names)
// parses without a panic or a hang.
func FuzzHostLocalResolvConf(f *testing.F) {
	f.Add([]byte("nameserver 10.1.0.53\nnameserver fd00::53\nsearch a.example b.example\ndomain example\noptions ndots:2 timeout:1\n"))
	f.Add([]byte("# comment\n; other\nnameserver\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		testutil.Bounded(t, "parseResolvConf", func() { _, _ = parseResolvConf(bytes.NewReader(data)) })
	})
}
