package hostlocal

import (
	"fmt"
	"github.com/containernetworking/cni/pkg/types"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	current "github.com/containernetworking/cni/pkg/types/100"
	"golang.org/x/sys/unix"
)

// prevWith is a prevResult holding the given addresses.
func prevWith(cidrs ...string) *current.Result {
	GinkgoHelper()
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	for _, c := range cidrs {
		ip, n, err := net.ParseCIDR(c)
		Expect(err).NotTo(HaveOccurred())
		n.IP = ip
		res.IPs = append(res.IPs, &current.IPConfig{Address: *n})
	}
	return res
}

var _ = Describe("on-disk state", func() {
	var (
		dataDir, netDir string
		c               *Config
	)
	BeforeEach(func() {
		dataDir = GinkgoT().TempDir()
		netDir = filepath.Join(dataDir, testNet)
		c = mustParse(conf("1.1.0", dataDir, ranges("10.1.0.0/24", "fd00::/64"), nil), "")
	})

	It("is written exactly as upstream writes it", func() {
		_, err := add(c, "ctr1", "eth0", quiet)
		Expect(err).NotTo(HaveOccurred())
		Expect(topLevel(dataDir)).To(Equal([]string{".cniforge", "10.1.0.2", "fd00::2", "last_reserved_ip.0", "last_reserved_ip.1", "lock"}))
		for _, name := range []string{"10.1.0.2", "fd00::2"} {
			Expect(readFile(filepath.Join(netDir, name))).To(Equal("ctr1\r\neth0"))
			fi, err := os.Stat(filepath.Join(netDir, name))
			Expect(err).NotTo(HaveOccurred())
			Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		}
		Expect(readFile(filepath.Join(netDir, "last_reserved_ip.0"))).To(Equal("10.1.0.2"))
		Expect(readFile(filepath.Join(netDir, "last_reserved_ip.1"))).To(Equal("fd00::2"))
		fi, err := os.Stat(filepath.Join(netDir, "lock"))
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		Expect(fi.Size()).To(BeZero())
	})

	It("keeps an index upstream's recursive walk never takes for a reservation", func() {
		// Upstream compares every file under the network folder, recursively,
		// with "<id>\r\n<ifname>" and, for old files, "<id>".
		_, err := add(c, "ctr1", "eth0", quiet)
		Expect(err).NotTo(HaveOccurred())
		_, err = add(c, "10.1.0.2", "eth0", quiet) // an ID that is also an address
		Expect(err).NotTo(HaveOccurred())
		Expect(upstreamMatches(dataDir, "ctr1", "eth0")).To(Equal([]string{"10.1.0.2", "fd00::2"}))
		Expect(upstreamMatches(dataDir, "10.1.0.2", "eth0")).To(Equal([]string{"10.1.0.3", "fd00::3"}))
		// Nothing under .cniforge looks like a reservation or an ID-only owner.
		err = filepath.Walk(filepath.Join(netDir, metaName), func(path string, info os.FileInfo, err error) error {
			Expect(err).NotTo(HaveOccurred())
			if !info.IsDir() {
				Expect(strings.HasPrefix(readFile(path), indexHeader+"\n")).To(BeTrue(), path)
			}
			return nil
		})
		Expect(err).NotTo(HaveOccurred())
	})

	Describe("written by upstream", func() {
		BeforeEach(func() {
			// What upstream leaves: reservations, an old ID-only one, the
			// round-robin cursor and its lock.
			writeFile(filepath.Join(netDir, "10.1.0.5"), "up1\r\neth0")
			writeFile(filepath.Join(netDir, "10.1.0.6"), "up1\r\neth1")
			writeFile(filepath.Join(netDir, "fd00::5"), "up1\r\neth0")
			writeFile(filepath.Join(netDir, "10.1.0.7"), "old\n") // pre-0.7 upstream: the ID alone
			writeFile(filepath.Join(netDir, "last_reserved_ip.0"), "10.1.0.7")
			writeFile(filepath.Join(netDir, "last_reserved_ip.1"), "fd00::5")
			writeFile(filepath.Join(netDir, "lock"), "")
		})

		It("CHECKs its reservations", func() {
			Expect(check(c, "up1", "eth0", prevWith("10.1.0.5/24", "fd00::5/64"))).To(Succeed())
			Expect(check(c, "up1", "eth0", nil)).To(Succeed())
			Expect(check(c, "up1", "eth1", prevWith("10.1.0.6/24"))).To(Succeed())
			Expect(check(c, "up1", "eth0", prevWith("10.1.0.6/24"))).To(MatchError(ContainSubstring("10.1.0.6 is reserved for container up1 ifname eth1")))
			Expect(check(c, "old", "eth0", prevWith("10.1.0.7/24"))).To(Succeed(), "an ID-only owner matches any ifname")
			Expect(check(c, "up1", "eth0", prevWith("10.1.0.9/24"))).To(MatchError(ContainSubstring("10.1.0.9 is not reserved")))
			Expect(check(c, "nobody", "eth0", nil)).To(MatchError(ContainSubstring("holds no reservation")))
		})

		It("continues its round-robin and refuses a duplicate of its attachments", func() {
			res, err := add(c, "new", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(addrsOf(res)).To(Equal([]string{"10.1.0.8/24", "fd00::6/64"}))
			_, err = add(c, "up1", "eth0", quiet)
			Expect(err).To(MatchError(ContainSubstring("10.1.0.5 is already reserved for container up1 ifname eth0")))
			_, err = add(c, "old", "eth3", quiet)
			Expect(err).To(MatchError(ContainSubstring("10.1.0.7 is already reserved for container old")))
		})

		It("DELs them: current format by (ID, ifname), the old format by ID", func() {
			Expect(del(c, "up1", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).To(Equal(map[string]string{"10.1.0.6": "up1\r\neth1", "10.1.0.7": "old\n"}))
			Expect(del(c, "old", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).To(Equal(map[string]string{"10.1.0.6": "up1\r\neth1"}))
			Expect(del(c, "up1", "eth1")).To(Succeed())
			Expect(reservations(dataDir)).To(BeEmpty())
			Expect(topLevel(dataDir)).To(ContainElements("lock", "last_reserved_ip.0", "last_reserved_ip.1"))
		})

		It("GCs them", func() {
			gcConf := mustParse(conf("1.1.0", dataDir, ranges("10.1.0.0/24", "fd00::/64"), nil), "")
			Expect(gc(gcConf, []types.GCAttachment{{ContainerID: "up1", IfName: "eth1"}, {ContainerID: "old", IfName: "eth0"}})).To(Succeed())
			Expect(reservations(dataDir)).To(Equal(map[string]string{"10.1.0.6": "up1\r\neth1", "10.1.0.7": "old\n"}))
		})

		It("notices what upstream adds or removes after our index was built", func() {
			_, err := add(c, "ours", "eth0", quiet) // builds and stamps the index
			Expect(err).NotTo(HaveOccurred())
			// Upstream, during a switch of suites, reserves and releases.
			writeFile(filepath.Join(netDir, "10.1.0.20"), "up2\r\neth0")
			Expect(os.Remove(filepath.Join(netDir, "10.1.0.6"))).To(Succeed())
			Expect(check(c, "up2", "eth0", nil)).To(Succeed())
			Expect(del(c, "up2", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).NotTo(HaveKey("10.1.0.20"))
			_, err = add(c, "up1", "eth1", quiet) // its old address is gone: no duplicate
			Expect(err).NotTo(HaveOccurred())
		})

		It("notices what upstream adds or removes in the same clock tick as our last change", func() {
			// On kernels before 6.13 a folder's timestamps move once per clock
			// tick (whole seconds on ext4 with 128-byte inodes) and one more
			// entry leaves its size alone; frozenClock makes that happen every time.
			opts := options{statDir: frozenClock}
			_, err := addWith(c, "ours", "eth0", quiet, opts)
			Expect(err).NotTo(HaveOccurred())
			writeFile(filepath.Join(netDir, "10.1.0.20"), "up2\r\neth0")
			Expect(checkWith(c, "up2", "eth0", nil, opts)).To(Succeed())
			Expect(delWith(c, "up2", "eth0", opts)).To(Succeed())
			Expect(reservations(dataDir)).NotTo(HaveKey("10.1.0.20"), "DEL leaked the address")

			Expect(os.Remove(filepath.Join(netDir, "10.1.0.5"))).To(Succeed()) // upstream DELs up1/eth0
			writeFile(filepath.Join(netDir, "10.1.0.21"), "up1\r\neth0")       // and ADDs it again
			Expect(checkWith(c, "up1", "eth0", nil, opts)).To(Succeed())
			Expect(delWith(c, "up1", "eth0", opts)).To(Succeed())
			Expect(reservations(dataDir)).NotTo(HaveKey("10.1.0.21"), "DEL leaked the address")
		})

		It("does not stamp a folder changed between setting its mtime and reading it back", func() {
			// A writer that ignores the lock (an admin) reserves right after
			// commit set the folder's mtime: the stat commit stamps is the
			// first to see a set mtime (it differs from the ctime).
			injected := false
			opts := options{statDir: func(path string, st *unix.Stat_t) error {
				if err := unix.Stat(path, st); err != nil || injected || st.Mtim == st.Ctim {
					return err
				}
				injected = true
				writeFile(filepath.Join(netDir, "10.1.0.20"), "admin\r\neth0")
				return unix.Stat(path, st)
			}}
			_, err := addWith(c, "ours", "eth0", quiet, opts)
			Expect(err).NotTo(HaveOccurred())
			Expect(injected).To(BeTrue())
			Expect(check(c, "admin", "eth0", nil)).To(Succeed())
			Expect(del(c, "admin", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).NotTo(HaveKey("10.1.0.20"), "DEL leaked the address")
		})
	})

	It("finds every attachment of a large network through the index, and keeps by-id files bounded", func() {
		const n = 300
		a := netip.MustParseAddr("10.1.0.2")
		for i := 0; i < n; i++ {
			writeFile(filepath.Join(netDir, a.String()), fmt.Sprintf("pod%d\r\neth0", i))
			a = a.Next()
		}
		byID := func() int {
			GinkgoHelper()
			entries, err := os.ReadDir(filepath.Join(netDir, metaName, byIDName))
			Expect(err).NotTo(HaveOccurred())
			return len(entries)
		}
		for i := 0; i < n; i++ {
			Expect(check(c, fmt.Sprintf("pod%d", i), "eth0", nil)).To(Succeed(), "pod%d", i)
		}
		Expect(check(c, "pod0", "eth1", nil)).NotTo(Succeed())
		Expect(check(c, "pod300", "eth0", nil)).NotTo(Succeed())
		Expect(byID()).To(BeZero(), "a rebuild writes one snapshot, not a file per attachment")

		for i := 0; i < n; i += 2 {
			Expect(del(c, fmt.Sprintf("pod%d", i), "eth0")).To(Succeed())
		}
		Expect(reservations(dataDir)).To(HaveLen(n / 2))
		for i := 0; i < n; i++ {
			err := check(c, fmt.Sprintf("pod%d", i), "eth0", nil)
			if i%2 == 0 {
				Expect(err).To(HaveOccurred(), "pod%d", i)
			} else {
				Expect(err).NotTo(HaveOccurred(), "pod%d", i)
			}
		}
		// Released snapshot entries are erased in place, not shadowed by
		// a by-id file each: no file names a deleted pod.
		Expect(byID()).To(BeZero())
		Expect(naming(dataDir, "pod0")).To(BeEmpty())
		Expect(naming(dataDir, "pod1")).NotTo(BeEmpty())

		// A pod added and deleted after the snapshot leaves no file behind.
		for i := 0; i < 20; i++ {
			_, err := add(c, fmt.Sprintf("new%d", i), "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(del(c, fmt.Sprintf("new%d", i), "eth0")).To(Succeed())
		}
		Expect(byID()).To(BeZero())
		// A released snapshot entry can be added again.
		_, err := add(c, "pod0", "eth0", quiet)
		Expect(err).NotTo(HaveOccurred())
		Expect(check(c, "pod0", "eth0", nil)).To(Succeed())
	})

	It("DEL of an attachment the snapshot records leaves no file naming it", func() {
		for _, id := range []string{"a", "b", "c"} {
			_, err := add(c, id, "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
		}
		// GC rebuilds the index: all three are now in the snapshot.
		Expect(gc(c, []types.GCAttachment{{ContainerID: "a", IfName: "eth0"}, {ContainerID: "b", IfName: "eth0"}, {ContainerID: "c", IfName: "eth0"}})).To(Succeed())
		Expect(naming(dataDir, "b")).To(ConsistOf(filepath.Join(metaName, snapshotName), "10.1.0.3", "fd00::3"))

		Expect(del(c, "b", "eth0")).To(Succeed())
		Expect(naming(dataDir, "b")).To(BeEmpty())
		Expect(filepath.Join(netDir, metaName, stampName)).To(BeAnExistingFile(), "no rebuild needed after a DEL")
		// The erased record hides nobody else's: a and c are still found
		// through the snapshot, and b can come back and leave again.
		Expect(check(c, "a", "eth0", nil)).To(Succeed())
		Expect(check(c, "c", "eth0", nil)).To(Succeed())
		Expect(check(c, "b", "eth0", nil)).To(HaveOccurred())
		_, err := add(c, "b", "eth0", quiet)
		Expect(err).NotTo(HaveOccurred())
		Expect(check(c, "b", "eth0", nil)).To(Succeed())
		Expect(del(c, "b", "eth0")).To(Succeed())
		Expect(naming(dataDir, "b")).To(BeEmpty())
		for _, id := range []string{"a", "c"} {
			Expect(del(c, id, "eth0")).To(Succeed())
			Expect(naming(dataDir, id)).To(BeEmpty())
		}
		Expect(reservations(dataDir)).To(BeEmpty())
	})

	Describe("after a crash", func() {
		stamp := func() string { return filepath.Join(netDir, metaName, stampName) }

		It("finds the stamp void between invalidate and commit, in the same file", func() {
			_, err := add(c, "a", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			var before unix.Stat_t
			Expect(unix.Stat(stamp(), &before)).To(Succeed())
			s, err := openStore(dataDir, testNet, false)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(s.close)
			ix, err := s.loadIndex()
			Expect(err).NotTo(HaveOccurred())
			matches := func() bool {
				GinkgoHelper()
				data, err := os.ReadFile(stamp())
				Expect(err).NotTo(HaveOccurred())
				folder, err := s.dirStamp()
				Expect(err).NotTo(HaveOccurred())
				_, ok := stampMatches(data, folder)
				return ok
			}
			Expect(matches()).To(BeTrue())
			Expect(ix.invalidate()).To(Succeed())
			Expect(matches()).To(BeFalse(), "a crash now must leave a rebuild behind")
			Expect(ix.commit()).To(Succeed())
			Expect(matches()).To(BeTrue())
			var after unix.Stat_t
			Expect(unix.Stat(stamp(), &after)).To(Succeed())
			Expect(after.Ino).To(Equal(before.Ino), "no new file: a new inode costs more than a write")
		})

		It("DEL releases a reservation the index never recorded", func() {
			_, err := add(c, "a", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			// A crash after the link, before the index entry: the stamp was
			// removed before the change, the file is there.
			Expect(os.Remove(stamp())).To(Succeed())
			writeFile(filepath.Join(netDir, "10.1.0.9"), "b\r\neth0")
			Expect(del(c, "b", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).To(Equal(map[string]string{"10.1.0.2": "a\r\neth0", "fd00::2": "a\r\neth0"}))
		})

		It("DEL succeeds, and ADD is not refused, when an index entry's file is gone", func() {
			_, err := add(c, "a", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			// A stale entry under a valid stamp: the file went away (as after
			// a crash of an older build, or a hand edit) yet the index still
			// names it.
			s, err := openStore(dataDir, testNet, false)
			Expect(err).NotTo(HaveOccurred())
			Expect(os.Remove(filepath.Join(netDir, "10.1.0.2"))).To(Succeed())
			ix, err := s.loadIndex()
			Expect(err).NotTo(HaveOccurred())
			Expect(ix.invalidate()).To(Succeed())
			Expect(ix.put("a", "eth0", []netip.Addr{netip.MustParseAddr("10.1.0.2"), netip.MustParseAddr("fd00::2")})).To(Succeed())
			Expect(ix.commit()).To(Succeed())
			Expect(s.close()).To(Succeed())

			Expect(check(c, "a", "eth0", prevWith("10.1.0.2/24"))).To(MatchError(ContainSubstring("10.1.0.2 is not reserved")))
			Expect(del(c, "a", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).To(BeEmpty())
			res, err := add(c, "a", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(addrsOf(res)).To(Equal([]string{"10.1.0.3/24", "fd00::3/64"}))
		})

		It("DEL removes an index entry that lists nothing, or addresses never reserved", func() {
			_, err := add(c, "a", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			editIndex(dataDir, func(ix *index) {
				// b: a released entry as an older build left it; d: an entry
				// whose reservations were never linked.
				writeFile(ix.byIDPath(indexKey("b", "eth0")), entryBody("b", "eth0", nil))
				Expect(ix.put("d", "eth0", []netip.Addr{netip.MustParseAddr("10.1.0.9")})).To(Succeed())
			})
			Expect(naming(dataDir, "b")).NotTo(BeEmpty())
			Expect(naming(dataDir, "d")).NotTo(BeEmpty())

			Expect(del(c, "b", "eth0")).To(Succeed())
			Expect(del(c, "d", "eth0")).To(Succeed())
			Expect(naming(dataDir, "b")).To(BeEmpty())
			Expect(naming(dataDir, "d")).To(BeEmpty())
			Expect(check(c, "a", "eth0", nil)).To(Succeed())
		})

		It("a stale index entry pointing at someone else's address releases nothing of theirs", func() {
			_, err := add(c, "a", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			editIndex(dataDir, func(ix *index) {
				Expect(ix.put("b", "eth0", []netip.Addr{netip.MustParseAddr("10.1.0.2")})).To(Succeed())
			})

			Expect(del(c, "b", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).To(HaveKey("10.1.0.2"))
			Expect(naming(dataDir, "b")).To(BeEmpty())
		})

		It("GC removes temp files and a reservation nobody lists, and rebuilds the index", func() {
			_, err := add(c, "a", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			writeFile(filepath.Join(netDir, metaName, "tmp.123"), "x\r\neth0")
			writeFile(filepath.Join(netDir, "10.1.0.30"), "x\r\neth0") // linked, index never updated
			gcConf := mustParse(conf("1.1.0", dataDir, ranges("10.1.0.0/24", "fd00::/64"), nil), "")
			Expect(gc(gcConf, []types.GCAttachment{{ContainerID: "a", IfName: "eth0"}})).To(Succeed())
			Expect(reservations(dataDir)).To(Equal(map[string]string{"10.1.0.2": "a\r\neth0", "fd00::2": "a\r\neth0"}))
			Expect(filepath.Join(netDir, metaName, "tmp.123")).NotTo(BeAnExistingFile())
			Expect(stamp()).To(BeAnExistingFile())
			Expect(check(c, "a", "eth0", nil)).To(Succeed())
		})

		It("survives parts of the index removed by hand", func() {
			_, err := add(c, "a", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(os.Remove(filepath.Join(netDir, metaName, snapshotName))).To(Succeed())
			Expect(check(c, "a", "eth0", nil)).To(Succeed(), "a missing snapshot means a rebuild")
			Expect(os.RemoveAll(filepath.Join(netDir, metaName, byIDName))).To(Succeed())
			_, err = add(c, "b", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(del(c, "b", "eth0")).To(Succeed())
			Expect(os.RemoveAll(filepath.Join(netDir, metaName))).To(Succeed())
			Expect(del(c, "a", "eth0")).To(Succeed())
			Expect(reservations(dataDir)).To(BeEmpty())
		})

		It("the next command rebuilds when the stamp is missing, clearing temp files", func() {
			_, err := add(c, "a", "eth0", quiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(os.Remove(stamp())).To(Succeed())
			writeFile(filepath.Join(netDir, metaName, "tmp.456"), "a\r\neth0")
			Expect(del(c, "a", "eth0")).To(Succeed())
			Expect(filepath.Join(netDir, metaName, "tmp.456")).NotTo(BeAnExistingFile())
			Expect(reservations(dataDir)).To(BeEmpty())
		})
	})
})

// frozenClock stats like a kernel whose clock did not tick since our last
// change: every timestamp the kernel set itself reads as one instant, and
// the folder's size stays put (ext4 grows a directory by whole blocks). On
// a create or unlink the kernel sets a directory's mtime and ctime to the
// same value, so an mtime equal to the ctime is one the kernel set; any
// other was set with utimensat and reads as it is.
func frozenClock(path string, st *unix.Stat_t) error {
	if err := unix.Stat(path, st); err != nil {
		return err
	}
	frozen := unix.Timespec{Sec: 1_700_000_000}
	if st.Mtim == st.Ctim {
		st.Mtim = frozen
	}
	st.Ctim = frozen
	st.Size = 4096
	return nil
}
