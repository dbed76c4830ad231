package iptables

import (
	"bytes"
	"strings"
)

// saveQuote quotes s the way iptables-save does and iptables-restore reads.
func SaveQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// restorePayload builds an iptables-restore --noflush input for the nat
// table. Each line is one restore command ("-N X", "-A X ...", ...).
func RestorePayload(lines []string) []byte { return TablePayload("nat", lines) }

// tablePayload is restorePayload for any table.
func TablePayload(table string, lines []string) []byte {
	var b bytes.Buffer
	b.WriteString("*" + table + "\n")
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString("COMMIT\n")
	return b.Bytes()
}
