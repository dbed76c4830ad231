// Package nftest holds what the netfilter packages' tests share: running
// in a namespace, counting the iptables processes a backend runs, listing
// and deleting rules with the real tools. Only tests import it.
package nftest
