package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The test binary itself is the input: a Go binary with build information
// and modules (cyclonedx-go at least) linked in.
func TestSBOMListsEveryModuleWithItsSum(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bi, err := buildinfo.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if len(bi.Deps) == 0 {
		t.Fatal("the test binary lists no modules: nothing to check")
	}
	var first, second bytes.Buffer
	if err := run(&first, self, "x", "v0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := run(&second, self, "x", "v0.0.1"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("two SBOMs of one binary differ")
	}

	var doc struct {
		SpecVersion string `json:"specVersion"`
		Metadata    struct {
			Component struct{ Name, Version string }
		}
		Components []struct {
			Name, Version string
			Hashes        []struct{ Alg, Content string }
			Properties    []struct{ Name, Value string }
		}
	}
	if err := json.Unmarshal(first.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SpecVersion != "1.6" || doc.Metadata.Component.Name != "x" || doc.Metadata.Component.Version != "v0.0.1" {
		t.Errorf("spec %q, component %+v", doc.SpecVersion, doc.Metadata.Component)
	}
	type listed struct{ version, sum, sha string }
	got := map[string]listed{}
	for _, c := range doc.Components {
		l := listed{version: c.Version}
		for _, p := range c.Properties {
			if p.Name == "go:sum" {
				l.sum = p.Value
			}
		}
		for _, h := range c.Hashes {
			if h.Alg == "SHA-256" {
				l.sha = h.Content
			}
		}
		got[c.Name] = l
	}
	if got["stdlib"].version != bi.GoVersion {
		t.Errorf("stdlib: %q, the binary was built with %s", got["stdlib"].version, bi.GoVersion)
	}
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		l, ok := got[m.Path]
		switch {
		case !ok:
			t.Errorf("%s %s: not in the SBOM", m.Path, m.Version)
		case l.version != m.Version || l.sum != m.Sum || (m.Sum != "" && len(l.sha) != 64):
			t.Errorf("%s: SBOM says %s %s (SHA-256 %q), the binary %s %s", m.Path, l.version, l.sum, l.sha, m.Version, m.Sum)
		}
	}
	if len(doc.Components) != len(bi.Deps)+1 {
		t.Errorf("%d components for %d modules and the toolchain", len(doc.Components), len(bi.Deps))
	}
}

// A further binary (the release's cniforge-light) is an application
// component with its own dependency entry; the modules both link are
// listed once, and every dependency names a listed component.
func TestSBOMOfTwoBinaries(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, self, "x", "v0.0.1", self); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Metadata struct {
			Component struct {
				BOMRef string `json:"bom-ref"`
			}
		}
		Components []struct {
			BOMRef     string `json:"bom-ref"`
			Type, Name string
		}
		Dependencies []struct {
			Ref       string
			DependsOn []string `json:"dependsOn"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	apps := 0
	for _, c := range doc.Components {
		if listed[c.BOMRef] {
			t.Errorf("%s listed twice", c.BOMRef)
		}
		listed[c.BOMRef] = true
		if c.Type == "application" {
			apps++
			if c.Name != filepath.Base(self) {
				t.Errorf("application component %q, want %q", c.Name, filepath.Base(self))
			}
		}
	}
	if apps != 1 || len(doc.Dependencies) != 2 || doc.Dependencies[0].Ref != doc.Metadata.Component.BOMRef {
		t.Fatalf("%d applications, dependencies %+v", apps, doc.Dependencies)
	}
	if !listed[doc.Dependencies[1].Ref] || len(doc.Dependencies[1].DependsOn) != len(doc.Dependencies[0].DependsOn) {
		t.Errorf("the second binary's dependencies: %+v", doc.Dependencies[1])
	}
	for _, d := range doc.Dependencies {
		for _, r := range d.DependsOn {
			if !listed[r] {
				t.Errorf("%s depends on %s, which is not listed", d.Ref, r)
			}
		}
	}
}
