// Package nftnl speaks nftables over netlink for the rule sets: the
// process's one lasting connection per network namespace (conn.go: a
// socket close costs a grace period, so a plugin exec closes one at exit),
// generation-consistent reads (a dump is trusted only when the ruleset
// generation is the same before and after), the sieve that decodes only the
// rules whose bytes hold a needle, single GET probes of tables, chains and
// set elements, hand-made batches, address and family helpers, and the
// rule comments (userdata) nft shows.
//
// It knows no rule set: it never decides what a table, chain or rule of
// ours holds, and runs no process.
package nftnl
