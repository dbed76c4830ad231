// Command sbom writes the bill of materials of a built Go binary as
// CycloneDX JSON: the Go toolchain (standard library) it was built with and
// every module linked into it, each with its version and go.sum checksum,
// read from the build information the Go linker stamps into the binary
// (debug/buildinfo, what `go version -m` prints). It runs nothing of the
// binary, so it works on every architecture's build.
//
//	go run ./scripts/sbom -version v1.2.3 BINARY [MORE...] >BINARY.cdx.json
//
// With more binaries (the release's companions beside cniforge), the
// first is the BOM's subject, each further one a component of type
// application named for its file, and the modules are listed once: each
// binary's dependencies say which of them it links.
//
// The output is a function of the binary alone (and -name/-version): no
// timestamp, no random serial number, components sorted, so a reproducible
// build gives a byte-identical SBOM (scripts/release.sh writes one per
// tarball).
//
// Each module's checksum is go.sum's "h1:" value, kept verbatim as the
// property go:sum (what `go version -m` and go.sum print) and as the
// SHA-256 hash it encodes (hex), which is what CycloneDX tools compare.
package main

import (
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

func main() {
	name := flag.String("name", "cniforge", "the name of the binary's component")
	version := flag.String("version", "", "the release version (default: the module version Go stamped)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: sbom [-name N] [-version V] BINARY [MORE...] >SBOM.cdx.json\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, flag.Arg(0), *name, *version, flag.Args()[1:]...); err != nil {
		fmt.Fprintf(os.Stderr, "sbom: %v\n", err)
		os.Exit(1)
	}
}

func run(w io.Writer, path, name, version string, more ...string) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read build info of %s: %w", path, err)
	}
	bom, err := fromBuildInfo(bi, name, version)
	if err != nil {
		return err
	}
	for _, m := range more {
		mbi, err := buildinfo.ReadFile(m)
		if err != nil {
			return fmt.Errorf("read build info of %s: %w", m, err)
		}
		if err := addBinary(bom, mbi, filepath.Base(m), version); err != nil {
			return err
		}
	}
	enc := cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	return enc.EncodeVersion(bom, cdx.SpecVersion1_6)
}

// fromBuildInfo is the SBOM of a binary with build information bi.
func fromBuildInfo(bi *debug.BuildInfo, name, version string) (*cdx.BOM, error) {
	if version == "" {
		version = bi.Main.Version
	}
	goVersion := strings.TrimPrefix(bi.GoVersion, "go")
	goVersion, _, _ = strings.Cut(goVersion, " ") // "1.26.8 X:boringcrypto" and the like

	var settings []cdx.Property
	for _, s := range bi.Settings {
		settings = append(settings, cdx.Property{Name: "go:build:" + s.Key, Value: s.Value})
	}
	settings = append(settings, cdx.Property{Name: "go:module", Value: bi.Main.Path})

	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Component: &cdx.Component{
			BOMRef:     "pkg:golang/" + bi.Main.Path + "/" + name + "@" + version,
			Type:       cdx.ComponentTypeApplication,
			Name:       name,
			Version:    version,
			PackageURL: "pkg:golang/" + bi.Main.Path + "@" + version,
			Properties: &settings,
		},
	}

	comps := []cdx.Component{{
		BOMRef:      "pkg:golang/stdlib@" + goVersion,
		Type:        cdx.ComponentTypeLibrary,
		Name:        "stdlib",
		Version:     bi.GoVersion,
		Description: "the Go toolchain and standard library the binary was built with",
		PackageURL:  "pkg:golang/stdlib@" + goVersion,
	}}
	for _, dep := range bi.Deps {
		c, err := moduleComponent(dep)
		if err != nil {
			return nil, err
		}
		comps = append(comps, c)
	}
	sort.Slice(comps[1:], func(i, j int) bool { return comps[1+i].Name < comps[1+j].Name })
	bom.Components = &comps

	deps := make([]string, len(comps))
	for i, c := range comps {
		deps[i] = c.BOMRef
	}
	bom.Dependencies = &[]cdx.Dependency{{Ref: bom.Metadata.Component.BOMRef, Dependencies: &deps}}
	return bom, nil
}

// moduleComponent describes one linked module; a replaced module is listed
// as its replacement (what was built), naming the original in properties.
func moduleComponent(dep *debug.Module) (cdx.Component, error) {
	m := dep
	var props []cdx.Property
	if dep.Replace != nil {
		m = dep.Replace
		props = append(props, cdx.Property{Name: "go:replaces", Value: dep.Path + "@" + dep.Version})
	}
	purl := "pkg:golang/" + m.Path + "@" + m.Version
	c := cdx.Component{
		BOMRef:     purl,
		Type:       cdx.ComponentTypeLibrary,
		Name:       m.Path,
		Version:    m.Version,
		PackageURL: purl,
	}
	if m.Sum != "" {
		sum, ok := strings.CutPrefix(m.Sum, "h1:")
		raw, err := base64.StdEncoding.DecodeString(sum)
		if !ok || err != nil || len(raw) != 32 {
			return c, fmt.Errorf("module %s@%s: checksum %q is not an h1: SHA-256", m.Path, m.Version, m.Sum)
		}
		c.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(raw)}}
		props = append(props, cdx.Property{Name: "go:sum", Value: m.Sum})
	}
	if len(props) > 0 {
		c.Properties = &props
	}
	return c, nil
}

// addBinary adds a further binary of the release to bom (made by
// fromBuildInfo of the first): an application component named name, the
// modules it links that bom does not list yet, and its own dependency
// entry naming every module it links.
func addBinary(bom *cdx.BOM, bi *debug.BuildInfo, name, version string) error {
	sub, err := fromBuildInfo(bi, name, version)
	if err != nil {
		return err
	}
	app := *sub.Metadata.Component
	comps := *bom.Components
	have := map[string]bool{}
	for _, c := range comps {
		have[c.BOMRef] = true
	}
	for _, c := range *sub.Components {
		if !have[c.BOMRef] {
			comps = append(comps, c)
		}
	}
	comps = append(comps, app)
	sort.Slice(comps[1:], func(i, j int) bool { return comps[1+i].Name < comps[1+j].Name })
	bom.Components = &comps
	deps := append(*bom.Dependencies, (*sub.Dependencies)[0])
	bom.Dependencies = &deps
	return nil
}
