// Package ocilayer makes the image layers (and edits the configs) the
// repository's image writers need (scripts/image, the node image;
// scripts/criimages, the CRI lane's images), reproducibly: root-owned
// entries with a fixed mtime, in PAX format, through go-containerregistry.
package ocilayer

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
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

// Configured is img with edit applied to a copy of its config file.
func Configured(img v1.Image, edit func(*v1.ConfigFile)) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	edit(cf)
	return mutate.ConfigFile(img, cf)
}

// OneLayer reads img's only layer, uncompressed, as a tar stream; the
// caller closes it. Another number of layers is an error.
func OneLayer(img v1.Image) (*tar.Reader, io.Closer, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, nil, err
	}
	if len(layers) != 1 {
		return nil, nil, fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, nil, err
	}
	return tar.NewReader(rc), rc, nil
}
