package node

import (
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

// Issue 29 item 2: check --repair must never cut an established
// connection. It ran portmap's and firewall's DEL before their ADD, and
// portmap's DEL flushes the conntrack entries of the pod: a stream through
// a host port then met a reset. Now it runs ADD alone, which puts back
// what is missing in place.

// streamServe accepts on addr in n and writes to each connection until
// it fails: a server that keeps streaming.
func streamServe(t *testing.T, n *ns.NetNS, addr string) {
	t.Helper()
	acceptIn(t, n, addr, func(c net.Conn) {
		go func() {
			defer c.Close()
			chunk := []byte(strings.Repeat("s", 512))
			for {
				if _, err := c.Write(chunk); err != nil {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	})
}

// stream is a client reading a server's stream for as long as the test
// runs; err is the first read error.
type stream struct {
	c    net.Conn
	mu   sync.Mutex
	read int
	err  error
	done chan struct{}
}

func openStream(t *testing.T, from *ns.NetNS, addr string) *stream {
	t.Helper()
	var c net.Conn
	must(t, from.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 10*time.Second)
		return err
	}))
	s := &stream{c: c, done: make(chan struct{})}
	t.Cleanup(func() { _ = c.Close(); <-s.done })
	go func() {
		defer close(s.done)
		buf := make([]byte, 4096)
		for {
			// A bound on silence, not a timing assertion: a stream
			// that carries nothing for this long is broken.
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			n, err := c.Read(buf)
			s.mu.Lock()
			s.read += n
			if err != nil {
				s.err = err
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// carries waits until s has read more than it had, or failed.
func (s *stream) carries() error {
	s.mu.Lock()
	start := s.read
	s.mu.Unlock()
	for {
		s.mu.Lock()
		read, err := s.read, s.err
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if read > start+64*1024 {
			return nil
		}
		select {
		case <-s.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestCheckRepairKeepsEstablishedConnections(t *testing.T) {
	chain := func(id string) string {
		sum := sha512.Sum512([]byte("nodenet" + id))
		return "CNI-DN-" + hex.EncodeToString(sum[:])[:21]
	}
	for _, tc := range []struct {
		name, backend string
		drift         func(n *node)
		// named: the plugin and what check names as missing.
		plugin, named string
	}{
		{"nftables, the pod's DNAT element deleted", "nftables", func(n *node) {
			n.inHost("nft", "delete", "element", "ip", "cni_hostport", "hostports_map", "{", "tcp", ".", "18080", "}")
		}, "portmap", "of hostports_map"},
		{"nftables, a shared chain flushed", "nftables", func(n *node) {
			n.inHost("nft", "flush", "chain", "ip", "cni_hostport", "prerouting")
		}, "portmap", "chain prerouting"},
		{"nftables, the table flushed", "nftables", func(n *node) {
			n.inHost("nft", "flush", "table", "ip", "cni_hostport")
		}, "portmap", "chain prerouting"},
		{"iptables, the pod's DNAT rules flushed", "iptables", func(n *node) {
			n.inHost("iptables", "-t", "nat", "-F", chain("ctr-a"))
		}, "portmap", chain("ctr-a") + " -p tcp"},
		{"iptables, a shared chain flushed", "iptables", func(n *node) {
			n.inHost("iptables", "-t", "nat", "-F", "CNI-HOSTPORT-SETMARK")
		}, "portmap", "CNI-HOSTPORT-SETMARK -m comment"},
		{"firewall's rules flushed", "nftables", func(n *node) {
			n.inHost("iptables", "-t", "filter", "-F", "CNI-FORWARD")
		}, "firewall", "CNI-FORWARD"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			checkRepairKeepsConnections(t, tc.backend, tc.drift, tc.plugin, tc.named)
		})
	}
}

func checkRepairKeepsConnections(t *testing.T, backend string, drift func(n *node), plugin, named string) {
	n := newNode(t)
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"nodenet","plugins":[
		{"type":"bridge","bridge":"cnode0","isGateway":true,"ipMasq":true,"ipMasqBackend":"nftables",
		 "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.123.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},
		{"type":"portmap","backend":%q,"capabilities":{"portMappings":true}},
		{"type":"firewall","backend":"iptables"}]}`, n.ipamData, backend)
	n.setConf(conf)
	// Forwarding only what the firewall plugin accepts.
	n.inHost("iptables", "-P", "FORWARD", "DROP")
	out, _ := testutil.NewTestNS(t)
	must(t, testutil.ConnectNS(
		testutil.VethEnd{NS: n.hostNS, Name: "vout", Addrs: []string{"10.124.0.1/24"}},
		testutil.VethEnd{NS: out, Name: "eth0", Addrs: []string{"10.124.0.2/24"}},
	))

	a, _ := testutil.NewTestNS(t)
	n.addMapped("ctr-a", a.Path(), 18080)
	streamServe(t, a, ":80")
	streamServe(t, out, ":9000")
	// A stream through the host port (portmap's DNAT), and one the
	// firewall forwards (from the pod to outside).
	hostPort := openStream(t, n.hostNS, "10.123.0.1:18080")
	forwarded := openStream(t, a, "10.124.0.2:9000")
	for name, s := range map[string]*stream{"host port": hostPort, "forwarded": forwarded} {
		if err := s.carries(); err != nil {
			t.Fatalf("%s stream before the drift: %v", name, err)
		}
	}

	drift(n)
	lines, text, rc := n.check()
	if rc != 1 || len(lines) != 1 || lines[0].Status != checkDrift {
		t.Fatalf("check after the drift: exit %d:\n%s", rc, text)
	}
	if p := lines[0].Problems; len(p) != 1 || p[0].Plugin != plugin || !strings.Contains(p[0].Error, named) {
		t.Errorf("check after the drift names %+v, want %s naming %q", p, plugin, named)
	}
	res, rc := n.cli("check", "--repair")
	t.Logf("cniforge check --repair:\n%s", res)
	if rc != 0 || !strings.Contains(res, "repaired") {
		t.Errorf("check --repair: exit %d:\n%s", rc, res)
	}
	for name, s := range map[string]*stream{"host port": hostPort, "forwarded": forwarded} {
		if err := s.carries(); err != nil {
			reset := errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")
			t.Errorf("%s stream after check --repair: %v (reset or closed: %v)", name, err, reset)
		}
	}
	if _, text, rc := n.check(); rc != 0 {
		t.Errorf("check after check --repair: exit %d:\n%s", rc, text)
	}
}
