// Command criimages writes the CRI lane's images (scripts/cri-lane.sh) as
// one archive that `ctr -n k8s.io images import` takes, so the lane needs
// no registry: the workload image, a root folder as one layer (the lane
// puts busybox-static, its applet links and a page for httpd there), and
// the pause image, catatonit as /catatonit run with -P.
//
//	go run ./scripts/criimages -o images.tar -rootfs DIR -catatonit /usr/bin/catatonit \
//	    -ref localhost/cniforge-lane:1 -pause-ref localhost/cniforge-pause:1
//
// github.com/google/go-containerregistry writes the layers, configs,
// manifests and the archive (see scripts/image for why a library).
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cniforge/plugins/scripts/internal/ocilayer"
)

func main() {
	out := flag.String("o", "", "the archive to write")
	rootfs := flag.String("rootfs", "", "the workload image's root folder")
	ref := flag.String("ref", "localhost/cniforge-lane:1", "the workload image's name")
	catatonit := flag.String("catatonit", "/usr/bin/catatonit", "a static catatonit, the pause image's one file")
	pauseRef := flag.String("pause-ref", "localhost/cniforge-pause:1", "the pause image's name")
	flag.Parse()
	if *out == "" || *rootfs == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(*out, *rootfs, *ref, *catatonit, *pauseRef); err != nil {
		fmt.Fprintf(os.Stderr, "criimages: %v\n", err)
		os.Exit(1)
	}
}

func write(out, rootfs, ref, catatonit, pauseRef string) error {
	work, err := folderLayer(rootfs)
	if err != nil {
		return fmt.Errorf("-rootfs %s: %w", rootfs, err)
	}
	workImg, err := image(work, v1.Config{Cmd: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}})
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(catatonit)
	if err != nil {
		return fmt.Errorf("-catatonit: %w", err)
	}
	pause, err := ocilayer.File("catatonit", bin, time.Unix(0, 0))
	if err != nil {
		return err
	}
	pauseImg, err := image(pause, v1.Config{Entrypoint: []string{"/catatonit", "-P"}})
	if err != nil {
		return err
	}
	images := map[name.Reference]v1.Image{}
	for r, img := range map[string]v1.Image{ref: workImg, pauseRef: pauseImg} {
		tag, err := name.NewTag(r)
		if err != nil {
			return fmt.Errorf("image name %q: %w", r, err)
		}
		images[tag] = img
	}
	return tarball.MultiRefWriteToFile(out, images)
}

// image: one layer and a config for this machine's architecture.
func image(layer v1.Layer, c v1.Config) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Config = runtime.GOARCH, "linux", c
	return mutate.ConfigFile(img, cf)
}

// folderLayer: dir's files, folders and symlinks as a layer, owned by
// root, with the modes they have and fixed times.
func folderLayer(dir string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "root", "root"
		hdr.ModTime, hdr.Format = time.Unix(0, 0), tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return ocilayer.Bytes(buf.Bytes())
}
