package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/plugins/meta/portmap"
)

// DefaultMinAge is how old a reservation no cached attachment owns must be
// before gc releases it. Until the runtime caches the result, a running ADD's
// reservation looks exactly like a leaked one; the kubelet gives a sandbox
// 2 minutes (its runtime request timeout), and this leaves a wide margin.
const DefaultMinAge = 5 * time.Minute

// GCOptions are gc's flags.
type GCOptions struct {
	Apply      bool          // DEL (default: a dry run that says what it would do)
	Network    string        // only this network
	MinAge     time.Duration // release an unowned reservation only when its file is this old
	AllowEmpty bool          // go on when the cache looks empty or wrong
	Every      time.Duration // run again at this interval until SIGTERM or SIGINT (0: once)
}

// GC DELs, through libcni, every cached attachment whose netns is
// positively gone, with the config cached with it; then every host-local
// reservation no cached attachment owns, old enough that no ADD can still
// be making it, in a network whose lock nobody holds: a DEL of exactly that
// container ID and ifname, through the network's conflist. It never sends
// the GC verb: GC names what to keep, so an ADD that started after the list
// was read would lose what it has made so far. Without --apply it only says
// what it would do; with --every it runs again at that interval until
// SIGTERM or SIGINT.
func GC(d *Dirs, o GCOptions, stdout, stderr io.Writer) int {
	if o.MinAge < 0 || o.Every < 0 {
		fmt.Fprintln(stderr, "cniforge gc: --min-age and --every take a duration of 0 or more")
		return 2
	}
	if o.Every == 0 {
		failed, err := gcRound(d, o, &gcLog{w: stdout})
		if err != nil {
			fmt.Fprintf(stderr, "cniforge gc: %v\n", err)
			return 1
		}
		if failed > 0 {
			fmt.Fprintf(stderr, "cniforge gc: %d DEL(s) failed\n", failed)
			return 1
		}
		return 0
	}

	// A signal ends the loop between rounds, never inside one: a plugin
	// killed midway through a DEL leaves half an attachment.
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
	defer stop()
	lg := &gcLog{w: stdout, loop: true}
	for {
		// A failed DEL has its line already; it is tried again next round.
		// A refusal is printed when it is new, as "keeps" lines are.
		if _, err := gcRound(d, o, lg); err != nil {
			lg.keep("round failed: %s", q(strings.ReplaceAll(err.Error(), "\n", "; ")))
		}
		lg.endRound()
		select {
		case <-ctx.Done():
			lg.act("stopped by a signal")
			return 0
		case <-time.After(o.Every):
		}
	}
}

// gcLog prints gc's lines: one per action (a DEL done or, in a dry run,
// one it would do, and what failed) and one per thing kept that gc might
// have been expected to take. In loop mode each line carries the time, and
// a "kept" line printed in the round before is not printed again.
type gcLog struct {
	w          io.Writer
	loop       bool
	prev, this map[string]bool
}

func (l *gcLog) act(format string, args ...any) { l.print(fmt.Sprintf(format, args...)) }

func (l *gcLog) keep(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if l.this == nil {
		l.this = map[string]bool{}
	}
	l.this[line] = true
	if l.loop && l.prev[line] {
		return
	}
	l.print(line)
}

func (l *gcLog) print(line string) {
	if l.loop {
		line = time.Now().UTC().Format(time.RFC3339) + " " + line
	}
	fmt.Fprintln(l.w, line)
}

func (l *gcLog) endRound() { l.prev, l.this = l.this, nil }

// gcRound is one pass of gc. err says why it did nothing; failed counts
// the DELs that failed (each printed).
func gcRound(d *Dirs, o GCOptions, lg *gcLog) (failed int, err error) {
	st, err := loadNode(d)
	if err != nil {
		return 0, err
	}
	if o.Network != "" && !st.hasNetwork(o.Network) {
		return 0, fmt.Errorf("no network %s in %s or the cache", q(o.Network), d.Conf)
	}
	if !o.AllowEmpty {
		if st.noResults {
			return 0, fmt.Errorf("%s has no results/ folder (is --cache-dir right?): every reservation would look unowned; nothing done (--allow-empty-cache goes on)", d.Cache)
		}
		if n := st.reservationCount(); st.runtimeAttachments() == 0 && n > 0 {
			return 0, fmt.Errorf("libcni cache %s holds no attachment while %d reservation(s) exist (is --cache-dir right?); nothing done (--allow-empty-cache goes on)", d.Cache, n)
		}
	}
	would := "would "
	if o.Apply {
		would = ""
	}
	if !st.view.ok {
		lg.keep("cannot prove any netns gone from here (%s): every attachment whose netns file is missing is kept; run gc on the host, as deploy/systemd's cniforge-gc.timer does",
			q(st.view.why))
	}
	ctx := context.Background() // a DEL is never cut short: see the loop in gc
	cni := libcni.NewCNIConfigWithCacheDir([]string{d.Bin}, d.Cache, nil)

	// The containers whose cached runtime attachment gc DELed this round,
	// and whose DEL failed: Multus's delegates follow the pod's DEL.
	delDone, delFailed := map[string]bool{}, map[string]int{}
	var delegates []attachment
	for _, a := range st.Attachments {
		if o.Network != "" && a.Network != o.Network {
			continue
		}
		net, who := q(a.Network), q(a.ContainerID)+" "+q(a.IfName)
		if a.Cache != "" {
			delegates = append(delegates, a)
			continue
		}
		switch a.NetnsState {
		case nsLive:
			continue
		case nsUnknown:
			lg.keep("%s: keeps %s (netns %s: %s)", net, who, q(dash(a.Netns)), q(a.NetnsWhy))
			continue
		}
		list, note, err := st.delConfig(a)
		if err != nil {
			lg.keep("%s: keeps %s (netns gone, but %s)", net, who, q(err.Error()))
			continue
		}
		if list.DisableGC || st.network(a.Network) != nil && st.network(a.Network).DisableGC {
			lg.keep("%s: keeps %s (netns gone, but the network has disableGC)", net, who)
			continue
		}
		lg.act("%s: %sDEL %s (netns %s is gone)%s", net, would, who, q(a.Netns), note)
		if !o.Apply {
			continue
		}
		if err := delCached(ctx, cni, list, a, lg); err != nil {
			delFailed[a.ContainerID]++ // counted below, unless gc resolves it
		} else {
			delDone[a.ContainerID] = true
		}
	}
	f, resolved := gcDelegates(d, o, st, lg, delegates, delDone, delFailed)
	failed += f
	for id, n := range delFailed {
		if !resolved[id] {
			failed += n
		}
	}

	var (
		aliases  map[string]bool // the host's veth aliases, read once
		aliasErr error
	)
	for i := range st.Networks {
		n := &st.Networks[i]
		if o.Network != "" && n.Name != o.Network {
			continue
		}
		orphans := st.orphansOf(n.Name)
		if len(orphans) == 0 {
			continue
		}
		net := q(n.Name)
		switch {
		case n.DisableGC:
			lg.keep("%s: keeps %d unowned reservation(s) (disableGC: another runtime may own them)", net, len(orphans))
			continue
		case len(st.unreadable) > 0:
			lg.keep("%s: keeps %d unowned reservation(s) (unreadable cache entries: their owners are unknown)", net, len(orphans))
			continue
		case !o.AllowEmpty && !st.hasAttachmentOn(n.Name):
			lg.keep("%s: keeps %d unowned reservation(s): no cached attachment owns any of its %d (is --cache-dir the runtime's? --allow-empty-cache goes on)",
				net, len(orphans), n.Used)
			continue
		}
		lock := filepath.Join(n.hl.DataDir, n.Name, "lock")
		if held, err := lockHeld(lock); err != nil || held {
			why := "held: a command is running"
			if err != nil {
				why = err.Error()
			}
			lg.keep("%s: skips its unowned reservations this round (lock %s %s)", net, q(lock), q(why))
			continue
		}
		for _, g := range groupByOwner(orphans) {
			ifName := g.ifName
			who := q(g.id) + " " + q(dash(ifName))
			age := time.Since(g.newest)
			switch {
			case g.id == "":
				lg.keep("%s: keeps %s (reservation(s) %s name no container)", net, who, g.ips())
				continue
			case age < o.MinAge:
				lg.keep("%s: keeps %s (reservation(s) %s %s old, under --min-age %s: an ADD may still be making them)",
					net, who, g.ips(), age.Round(time.Second), o.MinAge)
				continue
			case st.hasAttachmentID(n.Name, g.id):
				lg.keep("%s: keeps %s (reservation(s) %s: the container has other cached attachments on this network, whose rules a DEL by its ID could take)", net, who, g.ips())
				continue
			}
			if ifName == "" {
				ifName = "eth0" // an ID-only reservation: host-local's DEL matches it with any ifname
			}
			if aliases == nil && aliasErr == nil {
				aliases, aliasErr = hostAliases()
			}
			if aliasErr != nil {
				lg.keep("%s: keeps %s (reservation(s) %s: cannot list this namespace's links to see whether its veth lives: %s)", net, who, g.ips(), q(aliasErr.Error()))
				continue
			}
			if aliases[ip.AttachmentAlias(g.id, ifName)] {
				lg.keep("%s: keeps %s (reservation(s) %s: its veth is still in this namespace, so its netns lives)", net, who, g.ips())
				continue
			}
			lg.act("%s: %sDEL %s (releases unowned reservation(s) %s, %s old)", net, would, who, g.ips(), age.Round(time.Second))
			if !o.Apply {
				continue
			}
			rt := &libcni.RuntimeConf{ContainerID: g.id, IfName: ifName}
			// The forwards first: the reservation is what brings gc back
			// here, so a failure must leave it for the next round.
			err := releaseByOwner(n.list, g.id)
			if err == nil {
				err = cni.DelNetworkList(ctx, n.list, rt)
			}
			if err != nil {
				failed++
				lg.act("%s: DEL %s failed: %s", net, who, q(err.Error()))
			}
		}
	}
	return failed, nil
}

// releaseByOwner removes what the plugins of list keep on the host for
// container id and a DEL without runtime config leaves: an unowned
// reservation's DEL carries no capability arguments and no prevResult
// (nothing recorded them), and portmap's DEL with no portMappings touches
// nothing, as upstream's (a pod without host ports has none). Left alone,
// the dead pod's DNAT would send its host port to the next pod given the
// address. bridge's, ptp's, firewall's and bandwidth's DELs find their
// state by owner themselves.
func releaseByOwner(list *libcni.NetworkConfigList, id string) error {
	for _, p := range list.Plugins {
		if p.Network.Type == "portmap" {
			return portmap.TeardownOwner(list.Name, id)
		}
	}
	return nil
}

// delConfig is the config to DEL a with: the one libcni cached with it
// (what its ADD ran), else today's file of that network, said in note.
func (st *nodeState) delConfig(a attachment) (list *libcni.NetworkConfigList, note string, err error) {
	if len(a.entry.Config) > 0 {
		list, err := parseList(a.entry.Config)
		if err == nil && list.Name == a.Network {
			return list, "", nil
		}
	}
	if n := st.network(a.Network); n != nil {
		return n.list, fmt.Sprintf(" with today's %s (no usable config cached)", q(n.File)), nil
	}
	return nil, "", errors.New("no usable config cached, and none in the conf dir")
}

// delCached DELs a cached attachment through list with what its ADD was
// given; a failure is logged as gc's other DELs are.
func delCached(ctx context.Context, cni *libcni.CNIConfig, list *libcni.NetworkConfigList, a attachment, lg *gcLog) error {
	err := cni.DelNetworkList(ctx, list, a.runtimeConf())
	if err != nil {
		lg.act("%s: DEL %s failed: %s", q(a.Network), q(a.ContainerID)+" "+q(a.IfName), q(err.Error()))
	}
	return err
}

// gcDelegates handles Multus's delegate attachments of one round. Multus
// DELs a pod's delegates when the runtime DELs the pod, so they are kept,
// with two exceptions: the pod's DEL that gc just made (Multus did them, or
// would have in a dry run), and the pod's DEL that failed (Multus is gone:
// its binary removed while pods lived, and the runtime's DEL now goes to
// another config, leaving the cached Multus attachment no one can DEL).
// Then, the netns being gone, gc DELs the delegates itself from Multus's
// cache, as Multus would, and once all are DELed drops what was left of
// the pod: Multus's delegate list and the runtime's cached attachment
// (resolved: those pods' failed DELs are done).
func gcDelegates(d *Dirs, o GCOptions, st *nodeState, lg *gcLog, delegates []attachment, delDone map[string]bool, delFailed map[string]int) (failed int, resolved map[string]bool) {
	would := "would "
	if o.Apply {
		would = ""
	}
	ctx := context.Background()
	cni := libcni.NewCNIConfigWithCacheDir([]string{d.Bin}, d.Multus, nil)
	resolved = map[string]bool{}
	undone := map[string]bool{} // containers with a delegate not DELed
	// Containers with a delegate DELed here: one whose delegates Multus
	// knows only by its delegate list is left for the reservations pass.
	deled := map[string]bool{}
	for _, a := range delegates {
		net, who := q(a.Network), q(a.ContainerID)+" "+q(a.IfName)
		switch {
		case a.NetnsState == nsLive:
			continue
		case delDone[a.ContainerID]:
			continue // Multus DELed it with the pod
		case a.NetnsState != nsGone || delFailed[a.ContainerID] == 0:
			undone[a.ContainerID] = true
			lg.keep("%s: keeps %s (netns %s, but a delegate of Multus's: Multus DELs it when the runtime DELs the pod)", net, who, a.NetnsState)
			continue
		}
		list, note, err := st.delConfig(a)
		if err != nil {
			undone[a.ContainerID] = true
			lg.keep("%s: keeps %s (a delegate of Multus's whose pod's DEL failed, but %s)", net, who, q(err.Error()))
			continue
		}
		lg.act("%s: %sDEL %s (a delegate of Multus's, netns %s gone, the pod's DEL through Multus failed)%s", net, would, who, q(a.Netns), note)
		if !o.Apply {
			continue
		}
		if err := delCached(ctx, cni, list, a, lg); err != nil {
			failed++
			undone[a.ContainerID] = true
			continue
		}
		deled[a.ContainerID] = true
	}
	if !o.Apply {
		return failed, resolved
	}
	for id := range delFailed {
		if undone[id] || !deled[id] {
			continue
		}
		ok := true
		for _, a := range st.Attachments {
			if a.Cache != "" || a.ContainerID != id || a.NetnsState != nsGone {
				continue
			}
			// What libcni removes after a DEL that succeeded: the
			// delegates were the attachment.
			f := filepath.Join(d.Cache, "results", a.Network+"-"+a.ContainerID+"-"+a.IfName)
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				failed++
				ok = false
				lg.act("%s: remove %s failed: %s", q(a.Network), q(f), q(err.Error()))
				continue
			}
			lg.act("%s: removed the cached attachment of %s %s: Multus's DEL failed, its delegates DELed", q(a.Network), q(id), q(a.IfName))
		}
		f := filepath.Join(d.Multus, id)
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			failed++
			ok = false
			lg.act("remove Multus's delegate list %s failed: %s", q(f), q(err.Error()))
		}
		resolved[id] = ok
	}
	return failed, resolved
}
