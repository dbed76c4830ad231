// Command fuzzseeds writes the seed corpora of the config fuzz targets
// (testdata/fuzz/Fuzz*/rec-*) from the configs the tests use:
//
//   - every stdin and CNI_ARGS the test helpers handed to a plugin, as
//     pkg/testutil.RecordCall saved them under $CNIFORGE_FUZZ_RECORD
//     (run the suites with it set first);
//   - every string literal in a plugin's *_test.go files that is a JSON
//     object, or the keys of one (the config tests' fragments, merged over
//     the plugin's smallest recorded config).
//
// Each config goes to the target of its "type", to the target of its IPAM
// type, and to pkg/result's prevResult and GC-list targets when it has
// those keys. Configs of the same shape (the same key paths with the same
// JSON kinds, and the same CNI_ARGS keys) are one seed: the shortest.
//
// Usage: go run ./scripts/fuzzseeds -records DIR [-max N]   (from the repository root)
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// target is a fuzz target fed with configs.
type target struct {
	dir, name string
	args      bool // takes (stdin []byte, cniArgs string); else (stdin []byte)
}

// plugins maps a config "type" to its plugin's folder and config target.
var plugins = map[string]target{
	"bridge":      {"plugins/main/bridge", "FuzzBridgeConfig", true},
	"dummy":       {"plugins/main/dummy", "FuzzDummyConfig", true},
	"host-device": {"plugins/main/host-device", "FuzzHostDeviceConfig", true},
	"ipvlan":      {"plugins/main/ipvlan", "FuzzIPVLANConfig", true},
	"loopback":    {"plugins/main/loopback", "FuzzLoopbackConfig", true},
	"macvlan":     {"plugins/main/macvlan", "FuzzMACVLANConfig", true},
	"ptp":         {"plugins/main/ptp", "FuzzPTPConfig", true},
	"tap":         {"plugins/main/tap", "FuzzTapConfig", true},
	"vlan":        {"plugins/main/vlan", "FuzzVLANConfig", true},
	"bandwidth":   {"plugins/meta/bandwidth", "FuzzBandwidthConfig", true},
	"firewall":    {"plugins/meta/firewall", "FuzzFirewallConfig", true},
	"portmap":     {"plugins/meta/portmap", "FuzzPortmapConfig", true},
	"sbr":         {"plugins/meta/sbr", "FuzzSBRConfig", true},
	"tuning":      {"plugins/meta/tuning", "FuzzTuningConfig", true},
	"vrf":         {"plugins/meta/vrf", "FuzzVRFConfig", true},
	"host-local":  {"plugins/ipam/host-local", "FuzzHostLocalConfig", true},
	"static":      {"plugins/ipam/static", "FuzzStaticConfig", true},
	"dhcp":        {"plugins/ipam/dhcp", "FuzzDHCPConfig", true},
}

var (
	prevTarget = target{"pkg/result", "FuzzPrevResult", false}
	gcTarget   = target{"pkg/result", "FuzzGCAttachments", false}
)

type seed struct{ stdin, args string }

func main() {
	records := flag.String("records", "", "folder of records saved by testutil.RecordCall")
	max := flag.Int("max", 60, "most seeds per target (distinct shapes, shortest first)")
	flag.Parse()
	if *records == "" {
		fmt.Fprintln(os.Stderr, "usage: fuzzseeds -records DIR [-max N]")
		os.Exit(2)
	}
	byTarget := map[target][]seed{}
	add := func(s seed) {
		var obj map[string]any
		if json.Unmarshal([]byte(s.stdin), &obj) != nil {
			return
		}
		if t, ok := plugins[str(obj["type"])]; ok {
			byTarget[t] = append(byTarget[t], s)
		}
		if ipam, ok := obj["ipam"].(map[string]any); ok && str(ipam["type"]) != str(obj["type"]) {
			if t, ok := plugins[str(ipam["type"])]; ok {
				byTarget[t] = append(byTarget[t], s)
			}
		}
		if _, ok := obj["prevResult"]; ok {
			byTarget[prevTarget] = append(byTarget[prevTarget], seed{stdin: s.stdin})
		}
		if _, ok := obj["cni.dev/valid-attachments"]; ok {
			byTarget[gcTarget] = append(byTarget[gcTarget], seed{stdin: s.stdin})
		}
	}

	n, err := readRecords(*records, add)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuzzseeds:", err)
		os.Exit(1)
	}
	fmt.Printf("%d recorded calls\n", n)

	// The config tests' literals, whole or as fragments over a base.
	for typ, t := range plugins {
		base := smallest(byTarget[t], typ)
		lits, err := literals(t.dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fuzzseeds:", err)
			os.Exit(1)
		}
		for _, l := range lits {
			if s, ok := fromLiteral(l, base, typ); ok {
				add(s)
			}
		}
	}

	var names []string
	byName := map[string]target{}
	for t := range byTarget {
		names = append(names, t.name)
		byName[t.name] = t
	}
	sort.Strings(names)
	for _, name := range names {
		t := byName[name]
		kept := dedupe(byTarget[t], *max)
		size, err := write(t, kept)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fuzzseeds:", err)
			os.Exit(1)
		}
		fmt.Printf("%-22s %4d seeds (%d configs seen), %6d bytes\n", name, len(kept), len(byTarget[t]), size)
	}
}

func str(v any) string { s, _ := v.(string); return s }

func readRecords(dir string, add func(seed)) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var r struct{ Stdin, Args string }
		if err := json.Unmarshal(b, &r); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		add(seed{r.Stdin, r.Args})
	}
	return len(files), nil
}

// smallest is the shortest config of typ seen, the base fragments are
// merged over.
func smallest(seeds []seed, typ string) map[string]any {
	best := ""
	for _, s := range seeds {
		var obj map[string]any
		if json.Unmarshal([]byte(s.stdin), &obj) == nil && str(obj["type"]) == typ && (best == "" || len(s.stdin) < len(best)) {
			best = s.stdin
		}
	}
	if best == "" {
		best = fmt.Sprintf(`{"cniVersion": "1.1.0", "name": "fuzz", "type": %q}`, typ)
	}
	var obj map[string]any
	_ = json.Unmarshal([]byte(best), &obj) // parsed above
	return obj
}

// literals returns every string literal of the *_test.go files in dir.
func literals(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "fuzz") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(s, `"`) {
					out = append(out, s)
				}
			}
			return true
		})
	}
	return out, nil
}

// fromLiteral makes a config of a test's literal: a JSON object with a
// "type" as it is; other objects or bare keys ("mtu": 1400, ...) merged
// over base (into "ipam" for an IPAM plugin).
func fromLiteral(l string, base map[string]any, typ string) (seed, bool) {
	var obj map[string]any
	if json.Unmarshal([]byte(l), &obj) != nil {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), ","))
		if json.Unmarshal([]byte("{"+l+"}"), &obj) != nil {
			return seed{}, false
		}
	}
	if len(obj) == 0 {
		return seed{}, false
	}
	if _, ok := obj["type"]; ok {
		b, _ := json.Marshal(obj)
		return seed{stdin: string(b)}, true
	}
	merged := map[string]any{}
	for k, v := range base {
		merged[k] = v
	}
	into := merged
	if typ == "host-local" || typ == "static" || typ == "dhcp" {
		ipam := map[string]any{"type": typ}
		if b, ok := base["ipam"].(map[string]any); ok {
			for k, v := range b {
				ipam[k] = v
			}
		}
		merged["ipam"] = ipam
		if _, top := obj["cniVersion"]; !top {
			into = ipam
		}
	}
	for k, v := range obj {
		into[k] = v
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return seed{}, false
	}
	return seed{stdin: string(b)}, true
}

// shape is what tells two configs apart for a parser: their key paths
// with the kind of each value, and the keys of CNI_ARGS.
func shape(s seed) string {
	var v any
	if err := json.Unmarshal([]byte(s.stdin), &v); err != nil {
		return "raw:" + s.stdin
	}
	var paths []string
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(p+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(p+"[]", x)
			}
			if len(v) == 0 {
				paths = append(paths, p+"[]")
			}
		case string:
			paths = append(paths, p+":s")
		case float64:
			kind := ":n"
			if v < 0 {
				kind = ":-n"
			}
			paths = append(paths, p+kind)
		case bool:
			paths = append(paths, fmt.Sprintf("%s:%v", p, v))
		case nil:
			paths = append(paths, p+":null")
		}
	}
	walk("", v)
	for _, kv := range strings.Split(s.args, ";") {
		k, _, _ := strings.Cut(kv, "=")
		paths = append(paths, "CNI_ARGS."+k)
	}
	sort.Strings(paths)
	paths = compact(paths)
	return strings.Join(paths, ",")
}

func compact(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// dedupe keeps the shortest config of each shape, then the max shortest.
func dedupe(seeds []seed, max int) []seed {
	best := map[string]seed{}
	for _, s := range seeds {
		k := shape(s)
		if b, ok := best[k]; !ok || len(s.stdin)+len(s.args) < len(b.stdin)+len(b.args) ||
			(len(s.stdin)+len(s.args) == len(b.stdin)+len(b.args) && s.stdin+s.args < b.stdin+b.args) {
			best[k] = s
		}
	}
	out := make([]seed, 0, len(best))
	for _, s := range best {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if len(a.stdin)+len(a.args) != len(b.stdin)+len(b.args) {
			return len(a.stdin)+len(a.args) < len(b.stdin)+len(b.args)
		}
		return a.stdin+a.args < b.stdin+b.args
	})
	if len(out) > max {
		out = out[:max]
	}
	return out
}

// write replaces the target's rec-* seeds (other files there, crashers
// kept as regression seeds, stay) with seeds, in Go's corpus format.
func write(t target, seeds []seed) (int, error) {
	dir := filepath.Join(t.dir, "testdata", "fuzz", t.name)
	old, _ := filepath.Glob(filepath.Join(dir, "rec-*"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return 0, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	size := 0
	for _, s := range seeds {
		var b bytes.Buffer
		fmt.Fprintf(&b, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(s.stdin))
		if t.args {
			fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(s.args))
		}
		sum := sha256.Sum256(b.Bytes())
		if err := os.WriteFile(filepath.Join(dir, "rec-"+hex.EncodeToString(sum[:8])), b.Bytes(), 0o644); err != nil {
			return 0, err
		}
		size += b.Len()
	}
	return size, nil
}
