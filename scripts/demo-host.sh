# demo-host.sh: sourced by demo.sh and dhcp-demo.sh. What a demo records of
# the real host before it starts, and how it puts the host back and reports
# on it at the end, so both demos leave the machine as they found it.
#
#   demo_preflight NAME            first: refuses to run without root (the
#                                  demos make network namespaces), and puts
#                                  Go's usual home on PATH (sudo resets it)
#   demo_host_record               before making anything
#   demo_host_restore RC NS...     in the EXIT trap: deletes NS..., puts
#                                  /run/netns back as it was, removes $tmp,
#                                  prints the link counts; returns RC, or 1
#                                  when RC is 0 and the link count changed

demo_preflight() {
	if [ "$(id -u)" != 0 ]; then
		echo "$1 makes network namespaces and needs root: sudo scripts/$1" >&2
		exit 1
	fi
	if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
		PATH=$PATH:/usr/local/go/bin
	fi
}

demo_host_record() {
	links_before=$(ip -o link show | wc -l)
	netns_dir_existed=false
	[ -d /run/netns ] && netns_dir_existed=true
	netns_dir_mounted=false
	mountpoint -q /run/netns 2>/dev/null && netns_dir_mounted=true
	return 0
}

demo_host_restore() {
	local rc=$1 ns
	shift
	for ns in "$@"; do
		ip netns del "$ns" 2>/dev/null
	done
	# `ip netns add` makes /run/netns a mount point on first use; put it
	# back as it was if nothing else uses it now.
	if ! $netns_dir_mounted && mountpoint -q /run/netns 2>/dev/null && [ -z "$(ls -A /run/netns)" ]; then
		umount /run/netns 2>/dev/null
	fi
	if ! $netns_dir_existed && [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ]; then
		rmdir /run/netns 2>/dev/null
	fi
	rm -rf "$tmp"
	local links_after
	links_after=$(ip -o link show | wc -l)
	echo "removed namespaces $*, and $tmp"
	echo "real host: $links_before links before the demo, $links_after after"
	if [ "$links_before" != "$links_after" ]; then
		echo "WARNING: the real host's link count changed (something else may have changed it meanwhile)" >&2
		[ "$rc" = 0 ] && rc=1
	fi
	return "$rc"
}
