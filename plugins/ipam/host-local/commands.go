package hostlocal

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/plugin"
	"github.com/cniforge/plugins/pkg/result"
)

func cmdAdd(args *skel.CmdArgs) error {
	conf, err := parseAddConfig(args.StdinData, args.Args)
	if err != nil {
		return err
	}
	res, err := add(conf, args.ContainerID, args.IfName, plugin.Logger("ADD", args))
	if err != nil {
		return err
	}
	return result.Fprint(plugin.Stdout(args), res, conf.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData)
	if result.Code(err) == types.ErrInvalidNetworkConfig {
		// A config edited since ADD (a range that no longer parses) must
		// not keep the addresses reserved for good: DEL needs only the
		// network's name and dataDir.
		if lc, lerr := parseDelConfig(args.StdinData); lerr == nil {
			plugin.Logger("DEL", args).Warn("config no longer valid; DEL releases by name and dataDir", "err", err)
			conf, err = lc, nil
		}
	}
	if err != nil {
		return err
	}
	return del(conf, args.ContainerID, args.IfName)
}

func cmdCheck(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	prev, err := result.PrevResult(args.StdinData)
	if err != nil {
		return err
	}
	return check(conf, args.ContainerID, args.IfName, prev)
}

func cmdGC(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	valid, err := result.GCAttachments(args.StdinData)
	if err != nil {
		return err
	}
	return gc(conf, valid)
}

func cmdStatus(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	return status(conf)
}

// options let tests stop a command between its steps, as a crash would,
// or see the network folder as an older kernel shows it.
type options struct {
	// afterStep, when set, runs after each step that changes the disk.
	afterStep func(step string)
	// statDir, when set, replaces stat(2) of the network folder.
	statDir func(path string, st *unix.Stat_t) error
}

// add reserves one address per range set for (id, ifName).
func add(conf *Config, id, ifName string, log *slog.Logger) (*current.Result, error) {
	return addWith(conf, id, ifName, log, options{})
}

func addWith(conf *Config, id, ifName string, log *slog.Logger, opts options) (*current.Result, error) {
	if err := validateAttachment(id, ifName); err != nil {
		return nil, err
	}
	var dns types.DNS
	if conf.ResolvConf != "" {
		// Read before any reservation: a bad path must leave nothing behind.
		d, err := readResolvConf(conf.ResolvConf)
		if err != nil {
			return nil, result.InvalidConfig(err)
		}
		dns = d
	}
	s, err := openStore(conf.DataDir, conf.Name, true)
	if err != nil {
		return nil, result.IOFailure(err)
	}
	defer s.close()
	s.afterStep, s.statDir = opts.afterStep, opts.statDir

	ips, err := allocate(conf, s, id, ifName, log)
	if err != nil {
		return nil, err
	}
	return &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		IPs:        ips, // no Interface index: the interface plugin sets it
		Routes:     conf.Routes,
		DNS:        dns,
	}, nil
}

// del releases every reservation of (id, ifName). Nothing reserved (or no
// network folder at all) is success: DEL must be repeatable.
func del(conf *Config, id, ifName string) error {
	return delWith(conf, id, ifName, options{})
}

func delWith(conf *Config, id, ifName string, opts options) error {
	if err := validateAttachment(id, ifName); err != nil {
		return err
	}
	s, err := openStore(conf.DataDir, conf.Name, false)
	if errors.Is(err, errNoStore) {
		return nil
	}
	if err != nil {
		return result.IOFailure(err)
	}
	defer s.close()
	s.afterStep, s.statDir = opts.afterStep, opts.statDir

	ix, err := s.loadIndex()
	if err != nil {
		return err
	}
	exact, legacy, found, err := ix.lookupOwned(id, ifName)
	if err != nil {
		return err
	}
	if !found {
		return nil
	}
	// An entry that lists nothing, or addresses whose files never got
	// written or are gone, is still removed below: after DEL nothing in
	// the folder may name the attachment.
	if err := ix.invalidate(); err != nil {
		return err
	}
	var errs []error
	released := 0
	for _, a := range exact {
		ok, err := s.release(a, id, ifName)
		errs = append(errs, err)
		if ok {
			released++
			s.step("release " + a.String())
		}
	}
	if err := ix.put(id, ifName, nil); err != nil {
		errs = append(errs, err)
	}
	s.step("index")
	// Upstream releases an old (ID-only) reservation only when the
	// container has none in the current format. Its entry goes then even
	// when it lists nothing (an entry an older build left).
	if released == 0 && ix.legacy {
		for _, a := range legacy {
			_, err := s.release(a, id, "")
			errs = append(errs, err)
		}
		if err := ix.put(id, "", nil); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err // stamp stays removed: the next command rebuilds
	}
	return ix.commit()
}

// check fails unless (id, ifName) holds a reservation for every address in
// prev; with no addresses in prev, unless it holds at least one. It reads
// the reservation files themselves, not the index.
func check(conf *Config, id, ifName string, prev *current.Result) error {
	return checkWith(conf, id, ifName, prev, options{})
}

func checkWith(conf *Config, id, ifName string, prev *current.Result, opts options) error {
	if err := validateAttachment(id, ifName); err != nil {
		return err
	}
	s, err := openStore(conf.DataDir, conf.Name, false)
	if errors.Is(err, errNoStore) {
		return fmt.Errorf("container %s ifname %s holds no reservation in network %q (no folder %s)",
			id, ifName, conf.Name, filepath.Join(conf.DataDir, conf.Name))
	}
	if err != nil {
		return result.IOFailure(err)
	}
	defer s.close()
	s.statDir = opts.statDir

	var want []netip.Addr
	if prev != nil {
		for _, ipc := range prev.IPs {
			a, ok := netip.AddrFromSlice(ipc.Address.IP)
			if !ok {
				return fmt.Errorf("prevResult: %q is not an IP address", ipc.Address.String())
			}
			want = append(want, a.Unmap())
		}
	}
	if len(want) == 0 {
		ix, err := s.loadIndex()
		if err != nil {
			return err
		}
		exact, legacy, _, err := ix.lookupOwned(id, ifName)
		if err != nil {
			return err
		}
		for _, a := range append(exact, legacy...) {
			if o, err := s.readOwner(a); err == nil && o.holds(id, ifName) {
				return nil
			}
		}
		return fmt.Errorf("container %s ifname %s holds no reservation in network %q", id, ifName, conf.Name)
	}
	for _, a := range want {
		o, err := s.readOwner(a)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s is not reserved in network %q (no file %s)", a, conf.Name, s.path(a))
		}
		if err != nil {
			return fmt.Errorf("read reservation %s: %w", s.path(a), err)
		}
		if !o.holds(id, ifName) {
			return fmt.Errorf("%s is reserved for container %s ifname %s, not for container %s ifname %s",
				a, o.ID, o.IfName, id, ifName)
		}
	}
	return nil
}

// gc releases every reservation whose attachment the runtime no longer
// lists, then rebuilds the index from what is left. It reads every
// reservation file: GC is the authoritative sweep that puts right whatever
// a crash or a foreign writer left.
func gc(conf *Config, listed []types.GCAttachment) error {
	s, err := openStore(conf.DataDir, conf.Name, false)
	if errors.Is(err, errNoStore) {
		return nil
	}
	if err != nil {
		return result.IOFailure(err)
	}
	defer s.close()

	type key struct{ id, ifName string }
	valid := map[key]bool{}
	validID := map[string]bool{}
	for _, at := range listed {
		valid[key{at.ContainerID, at.IfName}] = true
		validID[at.ContainerID] = true
	}

	// Void the stamp first: a crash midway must leave a rebuild behind.
	if err := voidStamp(s.meta); err != nil {
		return err
	}
	res, err := s.scan()
	if err != nil {
		return err
	}
	var (
		kept []reservation
		errs []error
	)
	for _, r := range res {
		keep := valid[key{r.Owner.ID, r.Owner.IfName}]
		if r.Owner.Legacy {
			keep = validID[r.Owner.ID] // an ID-only owner matches any ifname
		}
		if keep {
			kept = append(kept, r)
			continue
		}
		if err := s.remove(r.Addr); err != nil {
			errs = append(errs, err)
			kept = append(kept, r)
		}
	}
	if _, err := s.rebuildIndex(kept); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// status fails (code 50) only for what stops every ADD: a data folder ADD
// could not make or write. A full range set stops only the ADDs that need
// it, so it fails STATUS only with ipam.failStatusWhenFull: containerd 2.x
// runs STATUS on every CRI Status call, and a failure there marks the whole
// node NotReady (the kubelet then evicts its pods).
func status(conf *Config) error {
	dir := filepath.Join(conf.DataDir, conf.Name)
	if err := usableDir(dir); err != nil {
		return result.Unavailable(err)
	}
	if !conf.FailStatusWhenFull {
		return nil
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil // nothing reserved yet; parseConfig refused ranges with no usable address
	}
	// No lock: STATUS is advisory and must not wait behind a long command.
	s := &store{dir: dir, meta: filepath.Join(dir, metaName)}
	for i, set := range conf.RangeSets {
		free, err := hasFree(conf, s, i)
		if err != nil {
			return err
		}
		if !free {
			return result.Unavailable(fmt.Errorf("%w in range set %s", errExhausted, set))
		}
	}
	return nil
}

// usableDir says why an ADD could not make or write the network folder
// dir: the nearest folder on its path that exists must be a folder this
// process may write and search (access(2) also sees a read-only mount).
func usableDir(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		// ENOTDIR: a parent is no folder; the walk up names it.
		if (errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR)) && p != filepath.Dir(p) {
			continue
		}
		if err != nil {
			return fmt.Errorf("data folder %s: %w", dir, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("data folder %s: %s is not a folder", dir, p)
		}
		if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
			return fmt.Errorf("data folder %s: %s is not writable: %w", dir, p, err)
		}
		return nil
	}
}
