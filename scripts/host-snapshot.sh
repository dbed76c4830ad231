# host-snapshot.sh: sourced by scripts/frontdoor.sh, scripts/podman-lane.sh and
# scripts/cri-lane.sh (whose shared host_unchanged, in scripts/lane.sh, calls it).
#
#   host_snapshot FILE [DIR...]
#
# Writes to FILE what a run must not change on the real host: links,
# addresses, routes, rules, network namespaces, iptables (nft and legacy,
# both families) and the nft ruleset, and the files under /var/lib/cni,
# /run/cni and each DIR given. Volatile parts (counters, timestamps, route
# expiry) are dropped, so two snapshots of an untouched host are equal.
# Namespaces and files named cniforge-test-* are left out: test processes
# (pkg/testutil) make and remove them, and another `go test` running
# meanwhile must not count against the run being checked.

host_snapshot() {
	local out=$1
	shift
	{
		echo "## links"
		ip -br link show
		echo "## addresses"
		ip -br addr show
		echo "## routes"
		ip route show table all
		ip -6 route show table all | sed -E 's/ expires [0-9]+sec//'
		echo "## rules"
		ip rule show
		ip -6 rule show
		echo "## namespaces"
		# The names in /run/netns, as `ip netns list` gives them, without
		# its nsid query: that fails ("Peer netns reference is invalid")
		# when another process's namespace goes away meanwhile, and an
		# nsid is assigned on first query anyway.
		ls -1 /run/netns 2>/dev/null | grep -v '^cniforge-test-'
		echo "## iptables"
		local save
		for save in iptables-nft-save ip6tables-nft-save iptables-legacy-save ip6tables-legacy-save; do
			command -v "$save" >/dev/null || continue
			echo "# $save"
			"$save" 2>&1 | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]/[-]/'
		done
		echo "## nftables"
		nft list ruleset 2>&1 | sed -E 's/counter packets [0-9]+ bytes [0-9]+/counter/'
		echo "## files"
		local d
		for d in /var/lib/cni /run/cni "$@"; do
			[ -e "$d" ] && find "$d" -printf '%p %y %s\n' | grep -v 'cniforge-test-' | sort
		done
	} >"$out" 2>&1
}
