package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cniforge/plugins/scripts/internal/ocilayer"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// entries lists img's one layer: "name type mode uid:gid link size".
func entries(t *testing.T, img v1.Image) ([]string, map[string]string) {
	t.Helper()
	tr, rc, err := ocilayer.OneLayer(img)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var list []string
	content := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		content[hdr.Name] = string(b)
		list = append(list, fmt.Sprintf("%s %c %o %d:%d %s %d", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Linkname, hdr.Size))
	}
	sort.Strings(list)
	return list, content
}

func load(t *testing.T, path, ref string) v1.Image {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("%s in %s: %v", ref, path, err)
	}
	return img
}

// The archive holds both images under their names: the workload image is
// the root folder as it is (files with their modes, folders, symlinks),
// owned by root, with a shell as its command; the pause image is catatonit
// run with -P.
func TestArchiveHoldsBothImages(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "bin"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "www"), 0o755))
	must(os.WriteFile(filepath.Join(root, "bin", "busybox"), []byte("busybox bytes"), 0o755))
	must(os.Symlink("busybox", filepath.Join(root, "bin", "sh")))
	must(os.WriteFile(filepath.Join(root, "www", "index.html"), []byte("page\n"), 0o644))
	cat := filepath.Join(dir, "catatonit")
	must(os.WriteFile(cat, []byte("catatonit bytes"), 0o755))
	out := filepath.Join(dir, "images.tar")
	must(write(out, root, "localhost/lane:1", cat, "localhost/pause:1", extra{}))

	work := load(t, out, "localhost/lane:1")
	list, content := entries(t, work)
	want := []string{
		"bin/ 5 755 0:0  0",
		"bin/busybox 0 755 0:0  13",
		"bin/sh 2 777 0:0 busybox 0",
		"www/ 5 755 0:0  0",
		"www/index.html 0 644 0:0  5",
	}
	if !slices.Equal(list, want) || content["www/index.html"] != "page\n" {
		t.Errorf("workload layer:\n%q\nwant\n%q", list, want)
	}
	cf, err := work.ConfigFile()
	must(err)
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !slices.Equal(cf.Config.Cmd, []string{"/bin/sh"}) {
		t.Errorf("workload config: %+v", cf)
	}

	pause := load(t, out, "localhost/pause:1")
	list, content = entries(t, pause)
	if !slices.Equal(list, []string{"catatonit 0 755 0:0  15"}) || content["catatonit"] != "catatonit bytes" {
		t.Errorf("pause layer: %q", list)
	}
	cf, err = pause.ConfigFile()
	must(err)
	if !slices.Equal(cf.Config.Entrypoint, []string{"/catatonit", "-P"}) {
		t.Errorf("pause config: %+v", cf.Config)
	}
}

// The e2e stage's images: agnhost's root folder run as agnhost's image runs
// (/agnhost pause), CoreDNS's binary as its entrypoint, and the pause image
// under every name -pause-ref lists.
func TestArchiveHoldsE2EImages(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(dir, "rootfs")
	must(os.MkdirAll(root, 0o755))
	agn := filepath.Join(dir, "agnhost")
	must(os.MkdirAll(agn, 0o755))
	must(os.WriteFile(filepath.Join(agn, "agnhost"), []byte("agnhost bytes"), 0o755))
	must(os.Symlink("agnhost", filepath.Join(agn, "agnhost-2")))
	cat := filepath.Join(dir, "catatonit")
	must(os.WriteFile(cat, []byte("catatonit bytes"), 0o755))
	dns := filepath.Join(dir, "coredns")
	must(os.WriteFile(dns, []byte("coredns bytes"), 0o755))
	out := filepath.Join(dir, "images.tar")
	must(write(out, root, "localhost/lane:1", cat, "localhost/pause:1,registry.k8s.io/pause:3.10.1",
		extra{agnhostRootfs: agn, agnhostRef: "registry.k8s.io/e2e-test-images/agnhost:2.56,registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7",
			coredns: dns, corednsRef: "registry.k8s.io/coredns/coredns:v1.12.4"}))

	a := load(t, out, "registry.k8s.io/e2e-test-images/agnhost:2.56")
	list, _ := entries(t, a)
	want := []string{"agnhost 0 755 0:0  13", "agnhost-2 2 777 0:0 agnhost 0"}
	if !slices.Equal(list, want) {
		t.Errorf("agnhost layer:\n%q\nwant\n%q", list, want)
	}
	cf, err := a.ConfigFile()
	must(err)
	if !slices.Equal(cf.Config.Entrypoint, []string{"/agnhost"}) || !slices.Equal(cf.Config.Cmd, []string{"pause"}) {
		t.Errorf("agnhost config: %+v", cf.Config)
	}
	if l, _ := entries(t, load(t, out, "registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7")); !slices.Equal(l, want) {
		t.Errorf("agnhost's folder as jessie-dnsutils: %q", l)
	}
	c := load(t, out, "registry.k8s.io/coredns/coredns:v1.12.4")
	list, content := entries(t, c)
	if !slices.Equal(list, []string{"coredns 0 755 0:0  13"}) || content["coredns"] != "coredns bytes" {
		t.Errorf("coredns layer: %q", list)
	}
	cf, err = c.ConfigFile()
	must(err)
	if !slices.Equal(cf.Config.Entrypoint, []string{"/coredns"}) {
		t.Errorf("coredns config: %+v", cf.Config)
	}
	for _, r := range []string{"localhost/pause:1", "registry.k8s.io/pause:3.10.1"} {
		list, _ := entries(t, load(t, out, r))
		if !slices.Equal(list, []string{"catatonit 0 755 0:0  15"}) {
			t.Errorf("%s layer: %q", r, list)
		}
	}
}
