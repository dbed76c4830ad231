// Package killadd holds a cross-plugin test (no code): an interface plugin
// and the host-local plugin it execs are SIGKILLed together at a random
// moment of ADD, then the runtime's DEL (or a GC that no longer lists the
// attachment) runs, and nothing of the attachment may remain: no link, no
// netfilter rule, no reservation, no index entry, no state file. The test
// runs the built binaries from $CNIFORGE_BIN (issue 7, part 3).
package killadd
