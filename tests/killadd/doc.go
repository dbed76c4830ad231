// Package killadd holds a cross-plugin test (no code; issue 14, kills
// mid-ADD): for every plugin that changes state, alone, and for the full
// chain bridge → portmap → bandwidth → tuning → firewall, on each netfilter
// backend, the runtime (libcni, with an exec that can kill) SIGKILLs the
// plugin's whole process group at a moment spread over its ADD, then runs
// its DEL (with the cached result when ADD completed), or removes the
// container's namespace and runs GC without the attachment listed.
// Afterwards a snapshot of the stand-in host, the container and the
// plugins' state folders must equal the one taken before: no link,
// address, route, rule, qdisc, ifb, sysctl, netfilter rule, reservation,
// index entry or state file of the attachment may remain. It runs the
// built binaries from $CNIFORGE_BIN. The CI count is low; scripts/killadd.sh
// runs the full count.
package killadd
