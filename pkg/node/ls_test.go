package node

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

func TestQuoteUnprintable(t *testing.T) {
	for in, want := range map[string]string{
		"ctr-1":              "ctr-1",
		"/run/netns/cni-1 2": "/run/netns/cni-1 2",
		"a\nb":               `"a\nb"`,
		"\x1b[2Jx":           `"\x1b[2Jx"`,
		"tab\there":          `"tab\there"`,
		"\xff":               `"\xff"`,
		"bidi\u202eevil":     `"bidi\u202eevil"`,
		`"quoted"`:           `"\"quoted\""`,
		"ünïcödé":            "ünïcödé",
	} {
		if got := q(in); got != want {
			t.Errorf("q(%q) = %s, want %s", in, got, want)
		}
	}
}

// Cache and reservation fields reach the terminal quoted when they hold
// what is not printable: no escape sequence, no faked row.
func TestLsQuotesCacheFields(t *testing.T) {
	evil := "ctr\x1b[2J\nnodenet  fake-ctr  eth0  /run/netns/x  10.0.0.9/24  live"
	st := &nodeState{
		Attachments: []attachment{{Network: "nodenet", ContainerID: evil, IfName: "eth0\x1b]0;title\x07",
			Netns: "/run/netns/a\nb", IPs: []string{"10.0.0.1/24\n"}, NetnsState: nsLive}},
		Orphans: []reservation{{Network: "nodenet", IP: "10.0.0.2", ContainerID: "x\x1b[31mred", IfName: "eth0\r\nnodenet  10.0.0.3",
			File: "/var/lib/cni/networks/nodenet/10.0.0.2"}},
		Networks: []network{{Name: "nodenet\x1b[1m", File: "/etc/cni/net.d/10\n.conflist", CNIVersion: "1.0.0"}},
		Warnings: []string{"bad\x1b[0m file"},
	}
	var b bytes.Buffer
	printNode(st, &Dirs{Cache: "/var/lib/cni", Conf: "/etc/cni/net.d"}, &b)
	out := b.String()
	t.Logf("ls:\n%s", out)
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("ls printed a control character:\n%q", out)
	}
	for _, fake := range []string{"\nnodenet  fake-ctr", "\nnodenet  10.0.0.3", "\nb "} {
		if strings.Contains(out, fake) {
			t.Errorf("ls printed a faked row %q:\n%s", fake, out)
		}
	}
	if !strings.Contains(out, strconv.Quote(evil)) {
		t.Errorf("ls did not print the container ID quoted:\n%s", out)
	}
	if n := strings.Count(out, "\n"); n != 12 {
		t.Errorf("ls printed %d lines, want 12 (headers, one row each, the warning):\n%s", n, out)
	}
}
