package node

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// Ls prints what the node holds: libcni's cached attachments (is their
// netns alive?), Multus's delegates, the host-local reservations no cached
// attachment owns, and per network the addresses used and free; as tables,
// or as JSON. It returns the exit status.
func Ls(d *Dirs, asJSON bool, stdout, stderr io.Writer) int {
	st, err := loadNode(d)
	if err != nil {
		fmt.Fprintf(stderr, "cniforge ls: %v\n", err)
		return 1
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return 1
		}
		return 0
	}
	printNode(st, d, stdout)
	return 0
}

// printNode prints st as tables. Every field read from the cache, a
// reservation file or a config goes through q: a container ID holding a
// newline or an escape sequence must not fake rows on the terminal.
func printNode(st *nodeState, d *Dirs, out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	printAttachments := func(cache string) {
		fmt.Fprintln(tw, "NETWORK\tCONTAINER\tIFNAME\tNETNS\tIPS\tNETNS STATE")
		for _, a := range st.Attachments {
			if a.Cache != cache {
				continue
			}
			state := a.NetnsState
			if a.NetnsWhy != "" {
				state += " (" + q(a.NetnsWhy) + ")"
			}
			ips := make([]string, len(a.IPs))
			for i, ip := range a.IPs {
				ips[i] = q(ip)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", q(a.Network), q(a.ContainerID), q(a.IfName), q(dash(a.Netns)),
				dash(strings.Join(ips, ",")), state)
		}
	}
	fmt.Fprintf(tw, "attachments (libcni cache %s):\n", q(filepath.Join(d.Cache, "results")))
	printAttachments("")
	if len(st.MultusPods) > 0 {
		fmt.Fprintf(tw, "\nattachments Multus delegated (its cache %s; pods: %d):\n", q(d.Multus), len(st.MultusPods))
		printAttachments("multus")
	}
	fmt.Fprintln(tw, "\nhost-local reservations no cached attachment owns:")
	fmt.Fprintln(tw, "NETWORK\tIP\tCONTAINER\tIFNAME\tFILE")
	for _, r := range st.Orphans {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", q(r.Network), r.IP, q(r.ContainerID), q(dash(r.IfName)), q(r.File))
	}
	fmt.Fprintf(tw, "\nnetworks (%s):\n", q(d.Conf))
	fmt.Fprintln(tw, "NETWORK\tCNIVERSION\tIPAM\tUSED\tFREE\tFILE")
	for _, n := range st.Networks {
		used := "-"
		if n.hl != nil {
			used = fmt.Sprint(n.Used)
		}
		free := dash(n.Free)
		if len(n.FreePerSet) > 1 {
			free += " (by range set: " + strings.Join(n.FreePerSet, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", q(n.Name), q(n.CNIVersion), q(dash(n.IPAM)), used, free, q(n.File))
	}
	tw.Flush()
	for _, w := range st.Warnings {
		fmt.Fprintf(out, "warning: %s\n", q(w))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// q prints a field read from the cache, a reservation file or a config as
// it is when every rune is printable, and Go-quoted otherwise: a newline or
// an escape sequence in a container ID must not reach the terminal, where it
// could fake lines or table rows. A field that starts with a quote is quoted
// too, so a quoted field is never ambiguous.
func q(s string) string {
	if !utf8.ValidString(s) || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
