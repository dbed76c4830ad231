// Package node is cniforge's node tool: what a node's CNI state holds, what
// leaked, what drifted, and what makes the node misbehave, read from the
// files the runtimes and plugins keep (libcni's result cache, written by
// containerd, CRI-O and Podman; Multus's cache; host-local's reservation
// files; the conf dir) and from the kernel. cmd/cniforge parses the command
// line and calls one verb here; each returns the exit status. Every verb
// works in the network and mount namespaces it is called in: the host's
// (a stand-in node's in the tests).
//
//	Ls       the cached attachments (is their netns alive?), Multus's
//	         delegates, the host-local reservations no cached attachment
//	         owns, and per network the addresses used and free.
//	GC       DELs, through libcni and with the config cached at ADD, every
//	         cached attachment whose netns is positively gone; then releases
//	         each host-local reservation no cached attachment owns, old enough
//	         (MinAge) that no ADD can still be making it, in a network whose
//	         lock is free, removing its port forwards by owner. A dry run
//	         unless Apply; with Every, a loop until SIGTERM or SIGINT.
//	Check    CHECKs every cached attachment one plugin at a time, naming each
//	         plugin whose part drifted; with Repair it re-applies what can be
//	         re-applied without re-making the container (masquerade rules,
//	         sbr's policy rules, portmap, firewall, bandwidth).
//	Doctor   plugins missing or failing VERSION, CNI rules in both
//	         iptables-legacy and -nft, forwarding or br_netfilter off, a range
//	         nearly full: each finding with what to do. It changes nothing.
//	Install  the running binary into a plugin folder, each plugin a link to
//	         it, every file replaced whole; a file not cniforge's only with
//	         Force.
//	Daemon   the node image's command: Install, then wait for a signal.
//
// What it never does: remove what may still live. A netns counts as gone
// only when its file is missing as seen from the host's mount namespace,
// which the tool must show it looks at (hostview.go): the kernel's initial
// one, or pid 1's when it runs in the initial pid namespace. Anything it
// cannot decide (a netns file that is no namespace, a stat error, a run from
// a container's own pid or mount namespace, a /proc/<pid>/ns path, an
// unreadable cache entry, a reservation that an ADD may still be making, a
// container with other cached attachments on the network, a network with
// disableGC, a delegate of Multus's while its pod's DEL has not failed) it
// keeps and says so, one line each.
// It never sends the GC verb (GC names what to keep, so an ADD that started
// after the list was read would lose what it made), never CHECKs or repairs
// an attachment whose netns it cannot decide, and never re-makes a
// container's interfaces, addresses or routes.
//
// Files by concern:
//
//	state.go     the node's state (attachments, reservations, networks) and loadNode
//	cache.go     libcni's and Multus's caches
//	networks.go  the conf dir's networks, host-local's reservations, free addresses
//	hostview.go  whether this process sees the host's mount namespace; a netns's state
//	ls.go        ls, and quoting what the files hold before it reaches a terminal
//	gc.go        gc's verb, loop and one round
//	unowned.go   what keeps an unowned reservation: the network's lock, a live veth
//	check.go     check; repair.go its --repair
//	doctor.go    doctor
//	install.go   install; daemon.go the node image's command
package node
