// Package parallel drives many pods' attachments on one network at once,
// through libcni and the built binaries, as a runtime on a busy node does
// (issue 14, "Parallel pods"). The Ginkgo test in this folder checks that
// every ADD and DEL succeeds, that no address is handed out twice and that
// nothing is left; scripts/parallel-bench.sh uses the same driver
// (scripts/parallelbench) to report pods/s.
//
// Everything happens in a stand-in host namespace and one container
// namespace per pod, all made by the caller.
package parallel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/ns"
)

// Network is the one network every pod attaches to.
type Network struct {
	Name string
	// Chain: bridge (ipMasq) → portmap (one mapping per pod) → firewall;
	// otherwise bridge with ipMasq alone.
	Chain bool
	// Backend is bridge's ipMasqBackend and portmap's backend: "iptables"
	// or "nftables".
	Backend string
	// Firewall is firewall's backend (Chain only); empty means "iptables".
	Firewall string
	DataDir  string // host-local's dataDir
	// CNIVersion is the conflist's cniVersion; empty means "1.1.0".
	// scripts/parallel-bench.sh sets an older one to compare with a
	// suite that refuses 1.1.0 (upstream 1.1.1).
	CNIVersion string
}

// Subnet is the pods' IPv4 subnet: room for 250 pods.
const Subnet = "10.78.0.0/24"

// ConfList renders the network as a conflist.
func (n Network) ConfList() (*libcni.NetworkConfigList, error) {
	plugins := []any{map[string]any{
		"type": "bridge", "bridge": "parbr0", "isGateway": true,
		"ipMasq": true, "ipMasqBackend": n.Backend,
		"ipam": map[string]any{
			"type": "host-local", "dataDir": n.DataDir,
			"ranges": []any{[]any{map[string]any{"subnet": Subnet}}},
			"routes": []any{map[string]any{"dst": "0.0.0.0/0"}},
		},
	}}
	if n.Chain {
		fw := n.Firewall
		if fw == "" {
			fw = "iptables"
		}
		plugins = append(plugins,
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "backend": n.Backend},
			// An explicit backend: an absent one would reach the machine's
			// firewalld over D-Bus, outside the test's namespaces.
			map[string]any{"type": "firewall", "backend": fw},
		)
	}
	ver := n.CNIVersion
	if ver == "" {
		ver = "1.1.0"
	}
	b, err := json.Marshal(map[string]any{"cniVersion": ver, "name": n.Name, "plugins": plugins})
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromBytes(b)
}

// Pod is one attachment: its container namespace, ID and host port.
type Pod struct {
	ID       string
	NS       *ns.NetNS
	HostPort int
	// Result is ADD's result, converted to the current version; IP its
	// first address.
	Result *current.Result
	IP     net.IP
}

// RuntimeConf is what a runtime passes libcni for p: eth0, one port mapping.
func (p *Pod) RuntimeConf() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: p.ID, NetNS: p.NS.Path(), IfName: "eth0",
		CapabilityArgs: map[string]any{
			"portMappings": []map[string]any{{"hostPort": p.HostPort, "containerPort": 80, "protocol": "tcp"}},
		},
	}
}

// Attachment is p as a GC list names it.
func (p *Pod) Attachment() types.GCAttachment {
	return types.GCAttachment{ContainerID: p.ID, IfName: "eth0"}
}

// Runtime calls libcni from the stand-in host namespace, where a runtime
// would run: every plugin exec starts there.
type Runtime struct {
	Host *ns.NetNS
	CNI  *libcni.CNIConfig
	List *libcni.NetworkConfigList
}

// NewRuntime looks for plugins in binDir and caches results in cacheDir.
func NewRuntime(host *ns.NetNS, list *libcni.NetworkConfigList, binDir, cacheDir string) *Runtime {
	return &Runtime{Host: host, List: list, CNI: libcni.NewCNIConfigWithCacheDir([]string{binDir}, cacheDir, nil)}
}

// Add runs the conflist's ADD for p and records its result.
func (r *Runtime) Add(p *Pod) error {
	return r.Host.Do(func() error {
		res, err := r.CNI.AddNetworkList(context.Background(), r.List, p.RuntimeConf())
		if err != nil {
			return fmt.Errorf("ADD %s: %w", p.ID, err)
		}
		cur, err := current.NewResultFromResult(res)
		if err != nil {
			return fmt.Errorf("ADD %s: result: %w", p.ID, err)
		}
		if len(cur.IPs) == 0 {
			return fmt.Errorf("ADD %s: result has no address", p.ID)
		}
		p.Result, p.IP = cur, cur.IPs[0].Address.IP
		return nil
	})
}

// Check runs the conflist's CHECK for p (with the cached result).
func (r *Runtime) Check(p *Pod) error {
	return r.Host.Do(func() error {
		if err := r.CNI.CheckNetworkList(context.Background(), r.List, p.RuntimeConf()); err != nil {
			return fmt.Errorf("CHECK %s: %w", p.ID, err)
		}
		return nil
	})
}

// Del runs the conflist's DEL for p (with the cached result, as a runtime).
func (r *Runtime) Del(p *Pod) error {
	return r.Host.Do(func() error {
		if err := r.CNI.DelNetworkList(context.Background(), r.List, p.RuntimeConf()); err != nil {
			return fmt.Errorf("DEL %s: %w", p.ID, err)
		}
		return nil
	})
}

// GC runs the conflist's GC with valid as the live attachments.
func (r *Runtime) GC(valid []types.GCAttachment) error {
	return r.Host.Do(func() error {
		if err := r.CNI.GCNetworkList(context.Background(), r.List, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
			return fmt.Errorf("GC: %w", err)
		}
		return nil
	})
}

// Phase runs op on every pod with workers goroutines taking the next pod
// as they finish, and returns the wall time from the first start to the
// last end, and every error.
func Phase(pods []*Pod, workers int, op func(*Pod) error) (time.Duration, error) {
	var (
		next atomic.Int64
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(pods) {
					return
				}
				if err := op(pods[i]); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// Duplicates returns every address that more than one pod got.
func Duplicates(pods []*Pod) []string {
	seen := map[string]string{}
	var dups []string
	for _, p := range pods {
		if p.IP == nil {
			continue
		}
		k := p.IP.String()
		if other, ok := seen[k]; ok {
			dups = append(dups, fmt.Sprintf("%s: %s and %s", k, other, p.ID))
		}
		seen[k] = p.ID
	}
	return dups
}

// PodsPerSecond is n pods over d.
func PodsPerSecond(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
