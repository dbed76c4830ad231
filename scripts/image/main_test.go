package main

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"go.yaml.in/yaml/v3"

	"github.com/cniforge/plugins/scripts/internal/ocilayer"
)

// archive writes the image of bin (and the companions beside it).
func archive(t *testing.T, bin string, epoch int64) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := write(bin, "arm64", "v9.9.9", epoch, "cniforge:v9.9.9", out); err != nil {
		t.Fatal(err)
	}
	return out
}

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// The archive is the same bytes from the same inputs, holds the binary at
// /cniforge (root, 0755) as its only file, and its config runs the
// DaemonSet's command for the right architecture.
func TestImageIsReproducibleAndRunsTheDaemon(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cniforge")
	binary := []byte("\x7fELF not really, but bytes the image must carry unchanged")
	if err := os.WriteFile(bin, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := archive(t, bin, 1700000000), archive(t, bin, 1700000000)
	if sum(t, a) != sum(t, b) {
		t.Error("two archives from the same inputs differ")
	}
	if sum(t, a) == sum(t, archive(t, bin, 1700000001)) {
		t.Error("the epoch changed nothing: the test cannot see the times")
	}

	img, err := tarball.ImageFromPath(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "arm64" || cf.OS != "linux" || !slices.Equal(cf.Config.Entrypoint, []string{"/cniforge"}) ||
		!slices.Equal(cf.Config.Cmd, []string{"daemon", "--dir", "/host/opt/cni/bin"}) ||
		cf.Created.Unix() != 1700000000 || cf.Config.Labels["org.opencontainers.image.version"] != "v9.9.9" {
		t.Errorf("config: %+v", cf)
	}
	tr, rc, err := ocilayer.OneLayer(img)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(tr)
	if hdr.Name != "cniforge" || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 || hdr.ModTime.Unix() != 1700000000 || !bytes.Equal(got, binary) {
		t.Errorf("layer entry %+v, content equal %v", hdr, bytes.Equal(got, binary))
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("the layer holds more than the binary: %v", err)
	}
}

// The DaemonSet runs the image's command with the folder that command
// installs into mounted from the host's /opt/cni/bin, and lands on every
// node: NotReady ones (no plugin yet) included.
func TestDaemonSetMatchesTheImage(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/cniforge-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Kind string
		Spec struct {
			Template struct {
				Spec struct {
					HostNetwork       bool   `yaml:"hostNetwork"`
					PriorityClassName string `yaml:"priorityClassName"`
					Tolerations       []map[string]string
					Containers        []struct {
						Args         []string
						Resources    map[string]map[string]string
						VolumeMounts []struct {
							Name      string
							MountPath string `yaml:"mountPath"`
						} `yaml:"volumeMounts"`
					}
					Volumes []struct {
						Name     string
						HostPath struct{ Path string } `yaml:"hostPath"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(raw, &ds); err != nil {
		t.Fatal(err)
	}
	pod := ds.Spec.Template.Spec
	if ds.Kind != "DaemonSet" || !pod.HostNetwork || pod.PriorityClassName != "system-node-critical" ||
		len(pod.Tolerations) != 1 || pod.Tolerations[0]["operator"] != "Exists" || len(pod.Containers) != 1 {
		t.Fatalf("DaemonSet: %+v", ds)
	}
	c := pod.Containers[0]
	img, err := Build([]byte("x"), nil, "amd64", "v", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	if !slices.Equal(c.Args[:len(cf.Config.Cmd)], cf.Config.Cmd) {
		t.Errorf("args %v do not start with the image's command %v", c.Args, cf.Config.Cmd)
	}
	if c.Resources["requests"]["memory"] == "" || c.Resources["limits"]["memory"] == "" {
		t.Errorf("resources: %v", c.Resources)
	}
	dir := cf.Config.Cmd[slices.Index(cf.Config.Cmd, "--dir")+1]
	mounted := ""
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			for _, v := range pod.Volumes {
				if v.Name == m.Name {
					mounted = v.HostPath.Path
				}
			}
		}
	}
	if mounted != "/opt/cni/bin" {
		t.Errorf("%s is mounted from host path %q, want /opt/cni/bin", dir, mounted)
	}
}

// With the companions beside cniforge (cniforge-light, cniforge-dhcp), the
// one layer holds them beside the binary (where cniforge install looks for
// them), root-owned and executable, and the entrypoint is still cniforge.
func TestImageCarriesTheCompanions(t *testing.T) {
	dir := t.TempDir()
	files := []struct {
		name    string
		content []byte
	}{{"cniforge", []byte("the full multicall")}, {"cniforge-light", []byte("the light multicall")}, {"cniforge-dhcp", []byte("the dhcp multicall")}}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.content, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img, err := tarball.ImageFromPath(archive(t, filepath.Join(dir, "cniforge"), 1700000000), nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil || !slices.Equal(cf.Config.Entrypoint, []string{"/cniforge"}) {
		t.Errorf("entrypoint: %+v, %v", cf, err)
	}
	tr, rc, err := ocilayer.OneLayer(img)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for _, want := range files {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("want %s: %v", want.name, err)
		}
		got, _ := io.ReadAll(tr)
		if hdr.Name != want.name || hdr.Mode != 0o755 || hdr.Uid != 0 || !bytes.Equal(got, want.content) {
			t.Errorf("entry %+v, content %q; want %s", hdr, got, want.name)
		}
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("the layer holds more than the three binaries: %v", err)
	}
}
