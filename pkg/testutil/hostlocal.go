package testutil

import (
	"net"
	"os"
	"path/filepath"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// Reservations lists host-local's reservation files under dataDir (every
// network's), as paths relative to dataDir: "<network>/<address>". A
// reservation is a file named for the address it reserves; the lock,
// last_reserved_ip.N and host-local's own bookkeeping are not. A dataDir that
// does not exist holds none. It reads files only, no namespace.
func Reservations(dataDir string) []string {
	ginkgo.GinkgoHelper()
	var out []string
	err := filepath.WalkDir(dataDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if net.ParseIP(filepath.Base(p)) == nil {
			return nil
		}
		rel, err := filepath.Rel(dataDir, p)
		if err != nil {
			return err
		}
		out = append(out, rel)
		return nil
	})
	if os.IsNotExist(err) {
		return nil
	}
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return out
}
