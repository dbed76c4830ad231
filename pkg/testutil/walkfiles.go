package testutil

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// WalkFiles calls fn with the path and content of every file under dir,
// in lexical order; it fails the spec if dir cannot be walked or a file
// cannot be read.
func WalkFiles(dir string, fn func(path string, data []byte)) {
	ginkgo.GinkgoHelper()
	gomega.Expect(filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fn(p, data)
		return nil
	})).To(gomega.Succeed())
}
