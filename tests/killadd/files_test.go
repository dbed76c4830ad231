package killadd

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// filesNaming lists the files under dirs whose name or content holds id:
// an index entry, a temp file, a state file of the attachment.
func filesNaming(dirs []string, id string) []string {
	GinkgoHelper()
	var out []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if strings.Contains(p, id) || strings.Contains(string(b), id) {
				shown := fmt.Sprintf("%q", b)
				if len(b) > 200 {
					shown = fmt.Sprintf("(%d bytes)", len(b))
				}
				out = append(out, fmt.Sprintf("file naming the attachment: %s %s", p, shown))
			}
			return nil
		})
		Expect(err).NotTo(HaveOccurred())
	}
	return out
}
