package all

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/cniforge/plugins"

// TestNothingCostlyAtInit: the multicall binary runs the package
// initialisation of every package it links in every plugin exec (a
// loopback exec pays for bridge's, dhcp's, netfilter's), so no package of
// this module that a multicall binary (cmd/cniforge, cniforge-light,
// cniforge-dhcp) links may build a table (a map literal),
// make a map, compile a regexp or
// parse a template in a package-level variable. Build it on first use
// (sync.OnceValue), or use an array or a switch; a func literal is not
// run at init, so what it builds is not counted.
func TestNothingCostlyAtInit(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := build.Default
	ctx.GOOS = "linux"
	ctx.CgoEnabled = false

	seen := map[string]bool{}
	queue := []string{module + "/cmd/cniforge", module + "/cmd/cniforge-light", module + "/cmd/cniforge-dhcp"}
	fset := token.NewFileSet()
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		if seen[path] {
			continue
		}
		seen[path] = true
		dir := filepath.Join(root, strings.TrimPrefix(path, module))
		pkg, err := ctx.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, module+"/") {
				queue = append(queue, imp)
			}
		}
		for _, name := range pkg.GoFiles {
			file := filepath.Join(dir, name)
			f, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, what := range costlyInits(fset, f) {
				t.Errorf("%s: built in every exec of the multicall binary: %s", strings.TrimPrefix(what, root+"/"), "make it lazy (sync.OnceValue), an array or a switch")
			}
		}
	}
	if !seen[module+"/plugins/main/loopback"] || !seen[module+"/pkg/netfilter"] {
		t.Fatalf("walked %d packages from cmd/cniforge, without loopback or pkg/netfilter: the walk is broken", len(seen))
	}
}

// costlyInits lists the package-level variable initialisers of f that build
// a map (a literal of more than two entries, or make) or call regexp's or
// text/template's constructors, outside func literals.
func costlyInits(fset *token.FileSet, f *ast.File) []string {
	var out []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			for _, v := range spec.(*ast.ValueSpec).Values {
				ast.Inspect(v, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.FuncLit:
						return false
					case *ast.CompositeLit:
						// A map of one or two entries (a registry to fill,
						// dhcp's one subcommand) costs an allocation or
						// two; a table costs an insert per entry.
						if _, ok := n.Type.(*ast.MapType); ok && len(n.Elts) > 2 {
							out = append(out, fset.Position(n.Pos()).String()+": a map literal")
						}
					case *ast.CallExpr:
						if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "make" && len(n.Args) > 0 {
							if _, ok := n.Args[0].(*ast.MapType); ok {
								out = append(out, fset.Position(n.Pos()).String()+": make(map)")
							}
						}
						if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
							if x, ok := sel.X.(*ast.Ident); ok && (x.Name == "regexp" || x.Name == "template") {
								out = append(out, fset.Position(n.Pos()).String()+": "+x.Name+"."+sel.Sel.Name)
							}
						}
					}
					return true
				})
			}
		}
	}
	return out
}

// Lookup finds every plugin Plugins lists, by its name, and nothing else.
func TestLookupFindsEveryPlugin(t *testing.T) {
	for _, p := range Plugins() {
		got, ok := Lookup(p.Name)
		if !ok || got.Name != p.Name {
			t.Errorf("Lookup(%q) = %q, %v", p.Name, got.Name, ok)
		}
	}
	if _, ok := Lookup("cniforge"); ok {
		t.Error(`Lookup("cniforge") found a plugin`)
	}
}
