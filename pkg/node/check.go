package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/version"
)

// Check runs CHECK, through libcni, for every attachment in the runtime's
// cache, one plugin of its chain at a time, so that every plugin whose part
// drifted is named (libcni's CheckNetworkList stops at the first). Runtimes
// rarely send CHECK, so nothing else notices rules, qdiscs or routes that an
// admin, a firewalld reload or `nft flush ruleset` removed.
//
// Each attachment is checked with the config cached when it was added (the
// conf dir's file may have changed since) and the cached result as
// prevResult, exactly as libcni's CheckNetworkList would. An attachment
// whose netns is gone is reported as leaked (cniforge gc reclaims it), not
// checked. With --repair, what drifted is re-applied where that leaves the
// container alone (see repair.go) and checked again. The exit status is 1
// when anything is not ok (or, with --repair, still not ok).

// Check states of an attachment.
const (
	checkOK      = "ok"
	checkDrift   = "drift"    // a plugin's CHECK failed
	checkLeaked  = "leaked"   // its netns is gone: cniforge gc reclaims it
	checkSkipped = "skipped"  // CHECK cannot run: disableCheck, a spec version before 0.4.0
	checkError   = "error"    // no config to check it with
	checkFixed   = "repaired" // drifted, and check --repair re-applied what was missing
)

type checkProblem struct {
	Plugin string `json:"plugin"`
	Error  string `json:"error"`
	// Repair is what --repair did: "repaired", or why it could not.
	Repair string `json:"repair,omitempty"`
}

type checkLine struct {
	Network     string         `json:"network"`
	ContainerID string         `json:"containerID"`
	IfName      string         `json:"ifname"`
	Netns       string         `json:"netns"`
	Status      string         `json:"status"`
	Reason      string         `json:"reason,omitempty"`
	Problems    []checkProblem `json:"problems,omitempty"`
}

// CheckOptions are check's flags.
type CheckOptions struct {
	JSON    bool   // print JSON
	Network string // only this network
	Repair  bool   // re-apply what drifted where that leaves the container alone
}

// Check checks every cached attachment as said at the top of this file,
// and returns the exit status.
func Check(d *Dirs, o CheckOptions, stdout, stderr io.Writer) int {
	st, err := loadNode(d)
	if err != nil {
		fmt.Fprintf(stderr, "cniforge check: %v\n", err)
		return 1
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{d.Bin}, d.Cache, nil)
	lines := []checkLine{}
	for _, a := range st.Attachments {
		if o.Network != "" && a.Network != o.Network {
			continue
		}
		lines = append(lines, checkAttachment(context.Background(), cni, st, a, repairWith(o.Repair, d.Bin)))
	}
	rc := 0
	for _, l := range lines {
		if l.Status != checkOK && l.Status != checkSkipped && l.Status != checkFixed {
			rc = 1
		}
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(lines); err != nil {
			return 1
		}
		return rc
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NETWORK\tCONTAINER\tIFNAME\tSTATUS\tDETAIL")
	for _, l := range lines {
		detail := []string{}
		if l.Reason != "" {
			detail = append(detail, l.Reason)
		}
		for _, p := range l.Problems {
			// A plugin's error may span lines (one per missing rule).
			msg := p.Plugin + ": " + strings.Join(strings.Fields(strings.ReplaceAll(p.Error, "\n", " | ")), " ")
			if p.Repair != "" {
				msg += " [" + p.Repair + "]"
			}
			detail = append(detail, msg)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", q(l.Network), q(l.ContainerID), q(l.IfName), l.Status,
			dash(q(strings.Join(detail, "; "))))
	}
	tw.Flush()
	return rc
}

// checkAttachment checks one cached attachment.
// repairWith is the bin dir --repair runs plugins from, "" without --repair.
func repairWith(on bool, binDir string) string {
	if !on {
		return ""
	}
	return binDir
}

func checkAttachment(ctx context.Context, cni *libcni.CNIConfig, st *nodeState, a attachment, repairBin string) checkLine {
	l := checkLine{Network: a.Network, ContainerID: a.ContainerID, IfName: a.IfName, Netns: a.Netns}
	if a.NetnsState == nsGone {
		l.Status, l.Reason = checkLeaked, fmt.Sprintf("netns %s is gone (cniforge gc reclaims it)", a.Netns)
		return l
	}
	if a.Cache != "" {
		l.Status, l.Reason = checkSkipped, "a "+a.Cache+" delegate: "+a.Cache+" runs its CHECK"
		return l
	}
	if a.NetnsState != nsLive {
		l.Status, l.Reason = checkError, "netns undecidable: "+a.NetnsWhy
		return l
	}
	rt := a.runtimeConf()
	list, err := cachedList(cni, st, a.Network, rt)
	if err != nil {
		l.Status, l.Reason = checkError, err.Error()
		return l
	}
	if ok, err := version.GreaterThanOrEqualTo(list.CNIVersion, "0.4.0"); err != nil || !ok {
		l.Status, l.Reason = checkSkipped, fmt.Sprintf("cniVersion %s has no CHECK (0.4.0 and later)", list.CNIVersion)
		return l
	}
	if list.DisableCheck {
		l.Status, l.Reason = checkSkipped, "disableCheck"
		return l
	}
	// libcni hands every plugin of the chain the same cached result as
	// prevResult, so a one-plugin list checks that plugin as the whole
	// list would, and the next plugin runs even when this one failed.
	checkOne := func(p *libcni.PluginConfig) error {
		one := *list
		one.Plugins = []*libcni.PluginConfig{p}
		return cni.CheckNetworkList(ctx, &one, rt)
	}
	var drifted []*libcni.PluginConfig
	for _, p := range list.Plugins {
		if err := checkOne(p); err != nil {
			l.Problems = append(l.Problems, checkProblem{Plugin: p.Network.Type, Error: err.Error()})
			drifted = append(drifted, p)
		}
	}
	l.Status = checkOK
	if len(l.Problems) == 0 {
		return l
	}
	l.Status = checkDrift
	if repairBin == "" {
		return l
	}
	cached, err := cni.GetNetworkListCachedResult(list, rt)
	if err != nil || cached == nil {
		for i := range l.Problems {
			l.Problems[i].Repair = fmt.Sprintf("not repaired: no cached result (%v)", err)
		}
		return l
	}
	repairErr := make([]error, len(drifted))
	for i, p := range drifted {
		repairErr[i] = repairPlugin(ctx, repairBin, list, p, rt, cached)
	}
	// Checked again only once all are repaired: one plugin's part may
	// fail another's CHECK (sbr's rule missing, bridge's routes are
	// nowhere to be found).
	fixed := 0
	for i, p := range drifted {
		err := checkOne(p)
		switch {
		case err == nil:
			l.Problems[i].Repair = checkFixed
			fixed++
		case repairErr[i] != nil:
			l.Problems[i].Repair = "not repaired: " + repairErr[i].Error()
		default:
			l.Problems[i].Repair = "re-applied, but CHECK still fails: " + err.Error()
		}
	}
	if fixed == len(drifted) {
		l.Status = checkFixed
	}
	return l
}

// cachedList is the network config the attachment was added with, from
// libcni's cache; a cache entry without one (libcni before 0.8 kept only
// the result) falls back to the conf dir's network of that name.
func cachedList(cni *libcni.CNIConfig, st *nodeState, name string, rt *libcni.RuntimeConf) (*libcni.NetworkConfigList, error) {
	probe := &libcni.NetworkConfigList{Name: name}
	raw, _, err := cni.GetNetworkListCachedConfig(probe, rt)
	if err == nil && len(raw) > 0 {
		list, err := libcni.ConfListFromBytes(raw)
		if err != nil {
			return nil, fmt.Errorf("cached config: %w", err)
		}
		return list, nil
	}
	for _, n := range st.Networks {
		if n.Name == name && n.list != nil {
			return n.list, nil
		}
	}
	if err == nil {
		err = errors.New("none cached")
	}
	return nil, fmt.Errorf("no config for network %q: not cached (%v) and not in the conf dir", name, err)
}
