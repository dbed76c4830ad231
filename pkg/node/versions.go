package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cniforge/plugins/plugins/companion"
)

// aboutLine is the first line a cniforge plugin prints on stderr when run
// without CNI_COMMAND (plugin.Plugin.About): its name and its suite version.
var aboutLine = regexp.MustCompile(`(?m)^CNI (\S+) plugin (\S+) \(cniforge\): `)

// versionFindings: every plugin of cniforge's in binDir should be of one
// version. An install without a companion (cniforge-dhcp) leaves the one an
// earlier install put there, and the plugins linked to it, at its own
// version: those run that version's code for every pod, DEL and GC
// included. A plugin that is not cniforge's, or that does not say its
// version, is not judged here (pluginFindings asks the ones networks use).
func versionFindings(binDir string) []finding {
	ents, err := os.ReadDir(binDir)
	if err != nil {
		return nil // pluginFindings and the runtimes say what a missing bin dir means
	}
	byVersion := map[string][]string{}
	marked := map[string]bool{} // by resolved file: hasMark reads the whole binary
	for _, e := range ents {
		name := e.Name()
		if name == "cniforge" || slices.Contains(companion.Binaries(), name) || strings.HasPrefix(name, ".") {
			continue // the multicalls themselves run no plugin under their own name
		}
		path := filepath.Join(binDir, name)
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			continue
		}
		ours, seen := marked[real]
		if !seen {
			ours, _ = hasMark(real)
			marked[real] = ours
		}
		if !ours {
			continue
		}
		if v := aboutVersion(path, name); v != "" {
			byVersion[v] = append(byVersion[v], name)
		}
	}
	if len(byVersion) < 2 {
		return nil
	}
	versions := make([]string, 0, len(byVersion))
	for v := range byVersion {
		versions = append(versions, v)
	}
	// The version most plugins have first: the others are the odd ones.
	slices.SortFunc(versions, func(a, b string) int {
		if d := len(byVersion[b]) - len(byVersion[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, v := range versions {
		parts = append(parts, fmt.Sprintf("%s at %s", strings.Join(byVersion[v], " "), v))
	}
	return []finding{{
		Problem: fmt.Sprintf("cniforge plugins of %d versions in %s: %s; each runs its own version's code for every pod, DEL and GC included",
			len(versions), binDir, strings.Join(parts, "; ")),
		Fix: fmt.Sprintf("install one release whole: cniforge install --dir %s with cniforge-light and cniforge-dhcp beside cniforge (a plugin left at another version, such as dhcp with no cniforge-dhcp beside the new cniforge, stays as it was)", binDir),
	}}
}

// aboutVersion runs the plugin at path without CNI_COMMAND, as a reader
// would to see what it is, and returns the version its about line gives
// for name ("" when it gives none).
func aboutVersion(path, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = []string{} // no CNI_COMMAND: the about text, not a plugin call
	out, _ := cmd.CombinedOutput()
	for _, m := range aboutLine.FindAllStringSubmatch(string(out), -1) {
		if m[1] == name {
			return m[2]
		}
	}
	return ""
}
