// Command criimages writes the CRI lane's images (scripts/cri-lane.sh) as
// one archive that `ctr -n k8s.io images import` takes, so the lane needs
// no registry: the workload image, a root folder as one layer (the lane
// puts busybox-static, its applet links and a page for httpd there), and
// the pause image, catatonit as /catatonit run with -P.
//
//	go run ./scripts/criimages -o images.tar -rootfs DIR -catatonit /usr/bin/catatonit \
//	    -ref localhost/cniforge-lane:1 -pause-ref localhost/cniforge-pause:1
//
// The Kubernetes lane's e2e stage (scripts/kube/e2e.sh) also asks for
// Kubernetes' test image and CoreDNS's, under the names e2e.test and the
// cluster use, and the pause image under e2e's name too (-pause-ref and
// -agnhost-ref take comma-separated lists):
//
//	-agnhost-rootfs DIR -agnhost-ref registry.k8s.io/e2e-test-images/agnhost:2.56
//	    DIR as one layer, run as agnhost's own image runs: /agnhost pause
//	-coredns FILE -coredns-ref registry.k8s.io/coredns/coredns:v1.12.4
//	    FILE as /coredns, its entrypoint
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
	"strings"
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
	pauseRef := flag.String("pause-ref", "localhost/cniforge-pause:1", "the pause image's names, comma-separated")
	var e extra
	flag.StringVar(&e.agnhostRootfs, "agnhost-rootfs", "", "also an agnhost image of this root folder")
	flag.StringVar(&e.agnhostRef, "agnhost-ref", "registry.k8s.io/e2e-test-images/agnhost:2.56", "the agnhost image's names, comma-separated")
	flag.StringVar(&e.coredns, "coredns", "", "also a CoreDNS image of this binary")
	flag.StringVar(&e.corednsRef, "coredns-ref", "registry.k8s.io/coredns/coredns:v1.12.4", "the CoreDNS image's name")
	flag.Parse()
	if *out == "" || *rootfs == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(*out, *rootfs, *ref, *catatonit, *pauseRef, e); err != nil {
		fmt.Fprintf(os.Stderr, "criimages: %v\n", err)
		os.Exit(1)
	}
}

// extra: the e2e stage's images, each written when its input is given.
type extra struct {
	agnhostRootfs, agnhostRef string
	coredns, corednsRef       string
}

func write(out, rootfs, ref, catatonit, pauseRef string, e extra) error {
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
	byRef := map[string]v1.Image{ref: workImg}
	for _, r := range strings.Split(pauseRef, ",") {
		byRef[r] = pauseImg
	}
	if e.agnhostRootfs != "" {
		l, err := folderLayer(e.agnhostRootfs)
		if err != nil {
			return fmt.Errorf("-agnhost-rootfs %s: %w", e.agnhostRootfs, err)
		}
		// As agnhost's Dockerfile: ENTRYPOINT ["/agnhost"], CMD ["pause"],
		// in / (where porter finds localhost.crt).
		img, err := image(l, v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"},
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
		if err != nil {
			return err
		}
		for _, r := range strings.Split(e.agnhostRef, ",") {
			byRef[r] = img
		}
	}
	if e.coredns != "" {
		bin, err := os.ReadFile(e.coredns)
		if err != nil {
			return fmt.Errorf("-coredns: %w", err)
		}
		l, err := ocilayer.File("coredns", bin, time.Unix(0, 0))
		if err != nil {
			return err
		}
		img, err := image(l, v1.Config{Entrypoint: []string{"/coredns"}})
		if err != nil {
			return err
		}
		byRef[e.corednsRef] = img
	}
	images := map[name.Reference]v1.Image{}
	for r, img := range byRef {
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
	return ocilayer.Configured(img, func(cf *v1.ConfigFile) {
		cf.Architecture, cf.OS, cf.Config = runtime.GOARCH, "linux", c
	})
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
