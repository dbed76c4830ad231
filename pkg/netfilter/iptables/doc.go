// Package iptables runs the iptables tools for the rule sets: one
// iptables-restore batch per change (prestarted on iptables-nft before the
// addresses are known), iptables-save reads parsed into tables, the
// per-chain flocks held from read to write, the xtables lock (-w), the
// nat-table probe and which variant (legacy or nft) the binaries are.
// Runner holds it together; the rule sets' iptables backends embed or
// hold one.
//
// It never decides rules: what to write and what a save means belongs to
// the rule set.
package iptables
