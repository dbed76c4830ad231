package hostlocal

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkAddDel measures one ADD, CHECK and DEL of a fresh container on a
// /16 that already holds n reservations (written the way upstream writes
// them), calling the plugin logic in-process. Upstream reads every
// reservation file on each command; the index keeps the cost flat.
// HOSTLOCAL_BENCH_DIR puts the data folder elsewhere than the test's temp
// folder (to compare file systems).
func BenchmarkAddDel(b *testing.B) {
	for _, n := range []int{0, 1000, 4000} {
		b.Run(fmt.Sprintf("allocs=%d", n), func(b *testing.B) {
			c, netDir, a := benchNetwork(b, n)
			if err := os.WriteFile(filepath.Join(netDir, "last_reserved_ip.0"), []byte(a.Prev().String()), 0o600); err != nil {
				b.Fatal(err)
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			// One warm-up round builds the index from the files.
			if _, err := add(c, "warmup", "eth0", log); err != nil {
				b.Fatal(err)
			}
			if err := del(c, "warmup", "eth0"); err != nil {
				b.Fatal(err)
			}

			// Flush the prefill's writes now, so their writeback is not
			// billed to the commands measured below.
			unix.Sync()

			var tAdd, tCheck, tDel time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprintf("bench%d", i)
				t0 := time.Now()
				res, err := add(c, id, "eth0", log)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := check(c, id, "eth0", res); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if err := del(c, id, "eth0"); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				tAdd += t1.Sub(t0)
				tCheck += t2.Sub(t1)
				tDel += t3.Sub(t2)
			}
			b.StopTimer()
			b.ReportMetric(float64(tAdd.Nanoseconds())/float64(b.N), "ns/add")
			b.ReportMetric(float64(tCheck.Nanoseconds())/float64(b.N), "ns/check")
			b.ReportMetric(float64(tDel.Nanoseconds())/float64(b.N), "ns/del")
		})
	}
}

// BenchmarkRebuild measures the one command after a foreign change (an
// upstream plugin, a crash) that rebuilds the index from 4000 reservation
// files: the cost upstream pays on every command.
func BenchmarkRebuild(b *testing.B) {
	c, netDir, _ := benchNetwork(b, 4000)
	foreign := filepath.Join(netDir, "10.128.255.1")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// What upstream does during a switch of suites: reserve, release.
		if err := os.WriteFile(foreign, []byte("up\r\neth0"), 0o600); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := del(c, "up", "eth0"); err != nil {
			b.Fatal(err)
		}
	}
}

// benchNetwork makes a /16 network in a fresh data folder (below
// HOSTLOCAL_BENCH_DIR when set) holding n reservations written the way
// upstream writes them, from 10.128.0.2 up. It returns the config, the
// network's folder and the address after the last reservation.
func benchNetwork(b *testing.B, n int) (*Config, string, netip.Addr) {
	b.Helper()
	dataDir := b.TempDir()
	if base := os.Getenv("HOSTLOCAL_BENCH_DIR"); base != "" {
		// e.g. /dev/shm, to see the cost without the disk's noise
		var err error
		if dataDir, err = os.MkdirTemp(base, "hostlocal-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dataDir) })
	}
	c, err := parseAddConfig([]byte(fmt.Sprintf(
		`{"cniVersion":"1.1.0","name":%q,"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.128.0.0/16"}]]}}`,
		testNet, dataDir)), "")
	if err != nil {
		b.Fatal(err)
	}
	netDir := filepath.Join(dataDir, testNet)
	if err := os.MkdirAll(netDir, 0o755); err != nil {
		b.Fatal(err)
	}
	a := netip.MustParseAddr("10.128.0.2")
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(netDir, a.String()), []byte(fmt.Sprintf("pod%d\r\neth0", i)), 0o600); err != nil {
			b.Fatal(err)
		}
		a = a.Next()
	}
	return c, netDir, a
}
