// Command image writes the cniforge node image: an OCI image holding only
// the static multicall binary cniforge and its companions beside it
// (plugins/companion: cniforge-light, cniforge-dhcp), whose default command installs the plugins
// into the host folder a DaemonSet mounts (deploy/cniforge-daemonset.yaml)
// and then stays up (reclaiming leaked attachments when asked). It needs
// no registry and no daemon: the image is written as an archive that
// `ctr -n k8s.io images import`, `podman load` and `docker load` take.
//
//	go run ./scripts/image -bin cniforge -arch amd64 -version v1.2.3 \
//	    -epoch 1700000000 -tag cniforge:v1.2.3 -o cniforge-image-amd64.tar
//
// The companions are the files of their names beside -bin, those that are
// there (an image without cniforge-light installs the light plugins as
// links to cniforge; one without cniforge-dhcp installs no dhcp).
//
// The archive is reproducible: the same binary, arch, version, epoch and
// tag give the same bytes (the layer's one entry has fixed owner, mode and
// mtime; the config's times are the epoch; nothing reads the clock).
//
// github.com/google/go-containerregistry writes the layer, config,
// manifest and archive: the OCI and Docker formats have enough corners
// (digests of compressed and uncompressed layers, the archive's
// manifest.json) that a well-kept library beats writing them again.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cniforge/plugins/plugins/companion"
	"github.com/cniforge/plugins/scripts/internal/ocilayer"
)

// BinPath is where the binary sits in the image; each companion sits
// beside it, at /<name>, where `cniforge install` looks for it.
const BinPath = "/cniforge"

// File is a companion binary for the image: its name and its bytes.
type File struct {
	Name    string
	Content []byte
}

func main() {
	bin := flag.String("bin", "", "the static cniforge binary (for -arch)")
	arch := flag.String("arch", "amd64", "GOARCH of the binary")
	version := flag.String("version", "", "the suite's version (a label)")
	epoch := flag.Int64("epoch", 0, "the commit's time, for every timestamp")
	tag := flag.String("tag", "", "the image reference the archive names, e.g. cniforge:v1.2.3")
	out := flag.String("o", "", "the archive to write")
	flag.Parse()
	if *bin == "" || *tag == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(*bin, *arch, *version, *epoch, *tag, *out); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

// write builds the image of binPath and the companions beside it, and
// writes it to out as an archive naming tag.
func write(binPath, arch, version string, epoch int64, tag, out string) error {
	binary, err := os.ReadFile(binPath)
	if err != nil {
		return err
	}
	var companions []File
	for _, c := range companion.Binaries() {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(binPath), c))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		companions = append(companions, File{c, b})
	}
	img, err := Build(binary, companions, arch, version, time.Unix(epoch, 0).UTC())
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", tag, err)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := tarball.Write(ref, img, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Build makes the image: one layer holding binary at BinPath and each
// companion beside it, and a config whose entrypoint is
// the binary and whose default command is the DaemonSet's (install into
// /host/opt/cni/bin, then stay up).
func Build(binary []byte, companions []File, arch, version string, when time.Time) (v1.Image, error) {
	files := []ocilayer.Entry{{Name: BinPath[1:], Content: binary}}
	for _, c := range companions {
		files = append(files, ocilayer.Entry{Name: c.Name, Content: c.Content})
	}
	layer, err := ocilayer.Files(files, when)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: when}, CreatedBy: "scripts/image: " + BinPath, Comment: "cniforge " + version}})
	if err != nil {
		return nil, err
	}
	img, err = ocilayer.Configured(img, func(cf *v1.ConfigFile) {
		cf.Architecture, cf.OS = arch, "linux"
		if arch == "arm" {
			cf.Variant = "v7" // release.sh builds GOARM=7, as upstream's arm
		}
		cf.Created = v1.Time{Time: when}
		cf.Config.Entrypoint = []string{BinPath}
		cf.Config.Cmd = []string{"daemon", "--dir", "/host/opt/cni/bin"}
		cf.Config.Labels = map[string]string{
			"org.opencontainers.image.title":   "cniforge",
			"org.opencontainers.image.version": version,
			"org.opencontainers.image.description": "the cniforge CNI plugins; its command installs them into the host's " +
				"/opt/cni/bin (mounted at /host/opt/cni/bin) and stays up",
		}
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: when})
}
