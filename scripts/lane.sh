# lane.sh: sourced by the runtime lanes, scripts/podman-lane.sh and
# scripts/cri-lane.sh (in both of their halves): what they do the same way.
# The lane sets, before it calls these:
#
#   lane                     its name, for the closing "$lane: N passed, M failed"
#                            (test_linux.sh reads that line)
#   ok_prefix, fail_prefix   how its pass and fail lines begin (each lane
#                            keeps the format it has always printed)
#   page                     the page its image serves (fetch)
#   hostaddr, clientaddr     the stand-in host's address on the link to the
#                            client netns, and the client's (client_netns)
#   cnidir                   its plugin dir (plugins_ours)
# shellcheck shell=bash disable=SC2154 # the variables above are the lane's

# shellcheck source=scripts/binaries.sh
. "$(dirname "${BASH_SOURCE[0]}")/binaries.sh"

passed=0 failed=0 skipped=0
ok() {
	passed=$((passed + 1))
	echo "$ok_prefix$*"
}
fail() {
	failed=$((failed + 1))
	echo "$fail_prefix$*" >&2
}

# skip WHAT: a check this run cannot make (never counted as passed).
skip() {
	skipped=$((skipped + 1))
	echo "skip - $*"
}

# summary: the lane's closing line (and how many checks it skipped).
summary() {
	[ "$skipped" = 0 ] || echo "$lane: $skipped skipped"
	echo "$lane: $passed passed, $failed failed"
}

# all_clear FINDING...: true when nothing was found; else each FINDING on
# its line, and false (the end of a check that collects what it found
# wrong in an array: all_clear "${bad[@]}").
all_clear() {
	[ $# = 0 ] || {
		printf '%s\n' "$@"
		return 1
	}
}

# bail WHY: the lane cannot run. Loud: a lane that cannot run must not
# look like a pass.
bail() {
	echo "$fail_prefix$*" >&2
	echo "$lane: 0 passed, 1 failed"
	exit 1
}

# run_check WHAT LOG COMMAND...: one pass/fail line for WHAT. COMMAND
# writes its reasons to stdout/stderr, kept in LOG and shown (indented)
# only on failure, and returns non-zero.
run_check() {
	local what=$1 log=$2
	shift 2
	if "$@" >"$log" 2>&1; then
		ok "$what"
	else
		fail "$what"
		sed 's/^/    /' "$log" >&2
	fi
}

# until_ok TRIES COMMAND...: COMMAND until it succeeds, 0.2 s apart (a
# listener or a daemon takes a moment to start; nothing is asserted on
# time).
until_ok() {
	local n=$1
	shift
	while ! "$@"; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || return 1
		sleep 0.2
	done
}

# median N...: the median of whole numbers (the upper one of an even count's
# middle two).
median() {
	printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

# fetch URL [NETNS]: the page at URL, fetched from the stand-in host or
# from NETNS; it must be the image's page.
fetch() {
	local url=$1 body
	if [ $# -gt 1 ]; then
		body=$(timeout 5 ip netns exec "$2" busybox wget -qO- "$url" 2>&1)
	else
		body=$(timeout 5 busybox wget -qO- "$url" 2>&1)
	fi
	[ "$body" = "$page" ] || {
		echo "GET $url${2:+ from netns $2}: [$body]"
		return 1
	}
}

# plugins_ours CONFLIST [PREFIX]: every plugin CONFLIST names (IPAM ones
# too) is cniforge's (a link to cniforge or one of its companions in
# $cnidir) and answers VERSION with
# the conflist's cniVersion among those it supports. Its reasons begin
# with PREFIX.
plugins_ours() {
	local conf=$1 prefix=${2:-} ver types t out r
	ver=$(jq -r .cniVersion "$conf") &&
		types=$(jq -r '.plugins[].type, (.plugins[].ipam.type // empty)' "$conf" | sort -u) || return 1
	for t in $types; do
		r=$(readlink -f "$cnidir/$t")
		[ "$(dirname "$r")" = "$cnidir" ] && [[ " $(suite_binaries "$cnidir") " == *" $(basename "$r") "* ]] || {
			echo "${prefix}plugin $t is not cniforge's in $cnidir"
			return 1
		}
		# A here-string, not a pipe: under pipefail, echo's EPIPE when the
		# plugin has exited first would count as a failure.
		out=$(CNI_COMMAND=VERSION "$cnidir/$t" <<<"{\"cniVersion\": \"$ver\"}" 2>&1) &&
			jq -e --arg v "$ver" '.supportedVersions | index($v)' <<<"$out" >/dev/null || {
			echo "$prefix$t VERSION for cniVersion [$ver]: $out"
			return 1
		}
	done
	echo "$prefix${types//$'\n'/ } answer VERSION $ver"
}

# state: what the stand-in host holds for attachments (every link, the
# qdiscs, the netfilter rules, the files under /var/lib/cni by name only,
# the netns files), to compare before the first container or pod and after
# the last.
state() {
	{
		echo "## links"
		ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
		echo "## qdiscs"
		tc qdisc show | sed -E 's/ refcnt [0-9]+//'
		echo "## iptables"
		iptables-save | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]/[-]/'
		ip6tables-save | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]/[-]/'
		echo "## nft"
		nft list ruleset | sed -E 's/counter packets [0-9]+ bytes [0-9]+/counter/'
		echo "## /var/lib/cni"
		find /var/lib/cni -printf '%p %y\n' | sort
		echo "## /run/netns"
		# Less a file of the node's own netns: CRI-O pins one for a
		# hostNetwork pod (the DaemonSet's), named anew for each pod.
		local f self
		self=$(stat -L -c %i /proc/self/ns/net)
		for f in /run/netns/*; do
			[ ! -e "$f" ] || [ "$(stat -L -c %i "$f")" = "$self" ] || basename "$f"
		done
	} 2>&1
}

# private_tmpfs: tmpfs on /run, /var/lib and /var/tmp, where the runtime
# and libcni write whatever their config says, and /run/netns and
# /var/lib/cni made there. Only inside the lane's mount namespace. /var/lib
# as a whole: mkdir of a missing /var/lib/cni would change the real disk.
private_tmpfs() {
	mount -t tmpfs -o mode=755 tmpfs /run &&
		mount -t tmpfs -o mode=755 tmpfs /var/lib &&
		mount -t tmpfs -o mode=1777 tmpfs /var/tmp &&
		mkdir -p /run/netns /var/lib/cni
}

# client_netns: the stand-in host's lo up, and a netns "client" (another
# machine) linked to it: lh0 ($hostaddr) in the stand-in host, eth0
# ($clientaddr, default route through the stand-in host) in the client.
client_netns() {
	ip link set lo up &&
		ip netns add client &&
		ip link add lh0 type veth peer name eth0 netns client &&
		ip addr add "$hostaddr/24" dev lh0 && ip link set lh0 up &&
		ip -n client addr add "$clientaddr/24" dev eth0 && ip -n client link set eth0 up &&
		ip -n client link set lo up &&
		ip -n client route add default via "$hostaddr"
}

# need_root: the lane makes namespaces and mounts.
need_root() {
	[ "$(id -u)" = 0 ] || {
		echo "$lane.sh makes namespaces and mounts and needs root" >&2
		exit 1
	}
}

# missing_tools TOOL...: the tools not on PATH, and bin/cniforge if it is
# not built, into the array missing.
missing_tools() {
	local t
	missing=()
	for t in "$@"; do
		command -v "$t" >/dev/null || missing+=("$t")
	done
	[ -x bin/cniforge ] || missing+=("bin/cniforge (run ./build_linux.sh)")
}

# busybox_rootfs DIR: the lane's image as a folder: busybox-static and its
# applet links in DIR/bin, and $page in DIR/www/index.html for httpd.
busybox_rootfs() {
	local dir=$1 a
	mkdir -p "$dir/bin" "$dir/www" &&
		cp "$(command -v busybox)" "$dir/bin/busybox" || return 1
	for a in $("$dir/bin/busybox" --list); do
		[ "$a" = busybox ] || ln -s busybox "$dir/bin/$a" || return 1
	done
	echo "$page" >"$dir/www/index.html"
}

# host_unchanged WORK WHAT DIR...: the real host's snapshot now
# (scripts/host-snapshot.sh, with DIR...) is WORK/host.before, taken before
# the lane; WHAT names what the snapshot covers.
host_unchanged() {
	local work=$1 what=$2
	shift 2
	host_snapshot "$work/host.after" "$@"
	if diff -u "$work/host.before" "$work/host.after" >"$work/host.diff"; then
		ok "the real host is unchanged ($what)"
	else
		fail "the lane changed the real host:"
		sed 's/^/    /' "$work/host.diff" >&2
	fi
}

# containerd_toml VERSION DISABLED_PLUGINS: the start of containerd's
# config (format VERSION) that both passes share: everything it keeps in
# the pass's folder, its sockets there, no debug or metrics listener. The
# pass appends its CRI tables.
containerd_toml() {
	cat <<-EOF
		version = $1
		root = "$pw/root"
		state = "$pw/state"
		plugin_dir = "$pw/plugins"
		disabled_plugins = $2
		[grpc]
		  address = "$pw/containerd.sock"
		[ttrpc]
		  address = "$pw/containerd-ttrpc.sock"
		[debug]
		  address = ""
		[metrics]
		  address = ""
		[plugins."io.containerd.internal.v1.opt"]
		  path = "$pw/opt"
	EOF
}

# containerd2_toml CNI_BIN_DIR: containerd 2.x's whole config for a lane
# whose folder is $pw (the CRI and Kubernetes lanes): containerd_toml's
# start, and a CRI plugin with runc, the lane's pinned pause image and the
# CNI plugins of CNI_BIN_DIR with the conflist in $pw/net.d.
containerd2_toml() {
	containerd_toml 3 '["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.nri.v1.nri"]'
	cat <<-EOF
		[plugins."io.containerd.grpc.v1.cri"]
		  disable_tcp_service = true
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		[plugins."io.containerd.cri.v1.images"]
		  snapshotter = "overlayfs"
		  [plugins."io.containerd.cri.v1.images".pinned_images]
		    sandbox = "localhost/cniforge-pause:1"
		[plugins."io.containerd.cri.v1.runtime"]
		  restrict_oom_score_adj = true
		  disable_apparmor = true
		  [plugins."io.containerd.cri.v1.runtime".containerd]
		    default_runtime_name = "runc"
		    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
		        BinaryName = "$(command -v runc)"
		        Root = "$pw/runc"
		  [plugins."io.containerd.cri.v1.runtime".cni]
		    bin_dirs = ["$1"]
		    conf_dir = "$pw/net.d"
		    max_conf_num = 1
	EOF
}

# containerd16_toml CNI_BIN_DIR: containerd 1.6's whole config for a lane
# whose folder is $pw (the CRI and Kubernetes lanes): containerd_toml's
# start, and a CRI plugin with runc, the lane's pause image and the CNI
# plugins of CNI_BIN_DIR with the conflist in $pw/net.d.
containerd16_toml() {
	containerd_toml 2 '["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]'
	cat <<-EOF
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "localhost/cniforge-pause:1"
		  restrict_oom_score_adj = true
		  disable_apparmor = true
		  disable_tcp_service = true
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        BinaryName = "$(command -v runc)"
		        Root = "$pw/runc"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "$1"
		    conf_dir = "$pw/net.d"
		    max_conf_num = 1
	EOF
}

# installed_from_image: $cnidir holds the node image's binaries
# (bin/cniforge and its companions) and a link per plugin to the binary
# that holds it (scripts/binaries.sh's holders), as install decides, and
# nothing half-written (the CRI and Kubernetes lanes' DaemonSet checks).
installed_from_image() {
	local b t want pairs
	pairs=$(holders bin) || return 1
	for b in $(suite_binaries bin); do
		cmp -s "$cnidir/$b" "bin/$b" || {
			echo "$cnidir/$b is not the image's binary"
			return 1
		}
	done
	while read -r t want; do
		[ "$(readlink "$cnidir/$t")" = "$want" ] || {
			echo "$cnidir/$t: $(ls -l "$cnidir/$t" 2>&1), want a link to $want"
			return 1
		}
	done <<<"$pairs"
	! ls -A "$cnidir" | grep '^\.' || {
		echo "temporary files left in $cnidir"
		return 1
	}
}

# exec_while_replaced TAG: in the background (its pid in $!), execs
# $cnidir/loopback (VERSION) over and over, as a runtime does while the
# plugins are being replaced, until $pw/TAG.stop exists; each failed exec
# adds a line to $pw/TAG.execfail.
exec_while_replaced() {
	rm -f "$pw/$1.stop" "$pw/$1.execfail"
	(
		while [ ! -e "$pw/$1.stop" ]; do
			CNI_COMMAND=VERSION "$cnidir/loopback" <<<'{"cniVersion": "1.0.0"}' >/dev/null 2>&1 ||
				echo "exec of $cnidir/loopback failed" >>"$pw/$1.execfail"
		done
	) &
}

# no_exec_failed TAG WHO: no exec of exec_while_replaced TAG failed while
# WHO replaced the files (read once its loop has ended).
no_exec_failed() {
	[ ! -s "$pw/$1.execfail" ] || {
		echo "a plugin exec failed while $2 replaced the files:"
		sort "$pw/$1.execfail" | uniq -c
		return 1
	}
}

# replaced_from_image WHO OLD NEW: WHO replaced $cnidir/cniforge (its
# inode went from OLD to NEW: an install replaces the files, never edits
# them in place), and $cnidir holds the image's binaries.
replaced_from_image() {
	[ "$2" != "$3" ] || {
		echo "$1 did not replace $cnidir/cniforge (inode $2)"
		return 1
	}
	installed_from_image
}
