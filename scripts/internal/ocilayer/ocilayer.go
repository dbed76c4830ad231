// Package ocilayer makes the image layers the repository's image writers
// need (scripts/image, the node image; scripts/criimages, the CRI lane's
// images), reproducibly: root-owned entries with a fixed mtime, in PAX
// format, through go-containerregistry.
package ocilayer

import (
	"archive/tar"
	"bytes"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is a layer holding one executable file, name (relative to the
// image's root), with content and mtime.
func File(name string, content []byte, mtime time.Time) (v1.Layer, error) {
	return Files([]Entry{{name, content}}, mtime)
}

// Entry is one executable file of a layer: its name (relative to the
// image's root) and content.
type Entry struct {
	Name    string
	Content []byte
}

// Files is a layer holding executable files, in the order given, each
// with mtime.
func Files(files []Entry, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.Name, Mode: 0o755, Size: int64(len(f.Content)), ModTime: mtime,
			Typeflag: tar.TypeReg, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return Bytes(buf.Bytes())
}

// Bytes is a layer whose uncompressed tar is b.
func Bytes(b []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}
