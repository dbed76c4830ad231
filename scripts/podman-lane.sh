#!/usr/bin/env bash
# podman-lane.sh — a real runtime against our plugins: Podman (Debian's
# podman and crun, with the CNI network backend) drives `cniforge install`ed
# plugins in a temporary plugin dir, and only those. test_linux.sh runs it.
#
# Everything happens inside namespaces the lane makes: a new network
# namespace stands in for the host (Podman's bridges, veths and rules land
# there), a private mount namespace gives Podman its own /run, /run/netns,
# /var/lib/cni, /var/lib/containers and /var/tmp (tmpfs; it writes them
# whatever --root says), and a pid namespace ends every process it started
# (conmon, the containers) when the lane ends. A second netns plays another
# machine on the stand-in host's LAN. The real host is compared before and
# after (links, addresses, routes, rules, netns, iptables, nft, /var/lib/cni,
# /var/lib/containers, /run/netns); any change fails the lane.
#
# Podman silently drops a network whose conflist names a plugin it cannot
# find or whose VERSION fails; the lane checks every conflist Podman writes
# (each plugin present, ours, and answering VERSION) and fails on Podman's
# "Error validating CNI config" warning, and a check makes sure it notices.
#
# Each check prints a pass/fail line; the lane closes with
# "podman-lane: N passed, M failed" (test_linux.sh adds it to its total)
# and exits non-zero on any failure. What it shares with scripts/cri-lane.sh
# (the counting, fetch, state, the VERSION check, ...) is in scripts/lane.sh.
#
#   scripts/podman-lane.sh            run as root after ./build_linux.sh
#   scripts/podman-lane.sh --runs N   time N runs of `podman run -p ... true`
#                                     + `podman rm`, with and without the
#                                     network (default 3; 0: none)
set -uo pipefail
self=$(realpath "$0")
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lane.sh
. "$(dirname "$self")/lane.sh"

# The inner half runs as pid 1 of the lane's namespaces (see the end).
image=localhost/cniforge-lane:1
page="cniforge podman lane"
hostaddr=192.168.77.1 # the stand-in host, on the link to the client netns
clientaddr=192.168.77.2
lanaddr=192.168.88.2 # the client netns on the macvlan parent's LAN

lane=podman-lane ok_prefix="podman-lane: ok: " fail_prefix="podman-lane: FAILED: "

# check DESCRIPTION FUNC ARGS...: one pass/fail line (run_check in
# scripts/lane.sh); it fails too if Podman dropped a network config
# meanwhile.
check() {
	run_check "$1" "$work/check.log" nothing_dropped "${@:2}"
	if [ -s "$work/dropped" ]; then
		fail "Podman dropped a network config (a missing plugin or a failing VERSION hides the network): $(cat "$work/dropped")"
		finish
	fi
}

# nothing_dropped COMMAND...: COMMAND succeeds, and Podman refused no
# network config while it ran.
nothing_dropped() {
	"$@" && [ ! -s "$work/dropped" ]
}

# pod ARGS...: podman with the lane's configuration. Its stderr goes to the
# log; a network config Podman refused to load is recorded for check().
pod() {
	local err rc=0
	err=$(mktemp "$work/err.XXXXXX")
	podman "$@" 2>"$err" || rc=$?
	{
		echo "+ podman $*"
		cat "$err"
	} >>"$work/podman.log"
	grep -E 'Error (validating|loading) CNI config' "$err" >>"$work/dropped"
	[ "$rc" = 0 ] || sed 's/^/podman: /' "$err" >&2
	rm -f "$err"
	return "$rc"
}

# ipof CTR NET: the container's address on network NET.
ipof() {
	pod inspect "$1" --format "{{(index .NetworkSettings.Networks \"$2\").IPAddress}}"
}
macof() {
	pod inspect "$1" --format "{{(index .NetworkSettings.Networks \"$2\").MacAddress}}"
}

# network_ok NAME: Podman lists NAME, and every plugin its conflist names is
# in the lane's plugin dir, is cniforge (a link to it), and answers VERSION
# with the conflist's cniVersion among those it supports.
network_ok() {
	local name=$1 conf out
	conf=$netdir/$name.conflist
	[ -f "$conf" ] || {
		echo "no $conf"
		return 1
	}
	plugins_ours "$conf" "$name: " || return 1
	out=$(pod network ls --format '{{.Name}}') || return 1
	grep -qx "$name" <<<"$out" || {
		echo "podman network ls does not list $name: [$(echo $out)]; $conf:"
		cat "$conf"
		return 1
	}
}

# --- the checks --------------------------------------------------------------

check_backend() {
	local b
	b=$(pod info --format '{{.Host.NetworkBackend}}') || return 1
	[ "$b" = cni ] || {
		echo "network backend: $b"
		return 1
	}
}

check_image() {
	pod import --change 'CMD=["/bin/sh"]' "$work/rootfs.tar" "$image" >/dev/null || return 1
	[ "$(pod run --rm --network none "$image" cat /www/index.html)" = "$page" ]
}

check_networks() {
	pod network create --subnet 10.89.7.0/24 lane0 >/dev/null &&
		pod network create --subnet 10.89.8.0/24 lane1 >/dev/null &&
		pod network create -d macvlan -o parent=mv0 --subnet 192.168.88.0/24 lanmac >/dev/null || return 1
	network_ok lane0 && network_ok lane1 && network_ok lanmac
}

# The lane's own guard must work: with a plugin missing, Podman drops the
# network (warning only) and network_ok says so.
check_guard() {
	local rc=0
	mv "$cnidir/tuning" "$work/tuning.aside"
	network_ok lane0 && rc=1
	pod network ls >/dev/null
	[ -s "$work/dropped" ] || rc=1
	: >"$work/dropped"
	mv "$work/tuning.aside" "$cnidir/tuning"
	[ "$rc" = 0 ] || echo "a missing tuning plugin went unnoticed"
	return "$rc"
}

# fetch_in CTR URL: the page at URL, fetched from inside container CTR.
fetch_in() {
	local body rc=0
	body=$(pod exec "$1" timeout 5 wget -qO- "$2" 2>&1) || rc=$?
	[ "$rc" = 0 ] && [ "$body" = "$page" ] || {
		echo "GET $2 from container $1: exit $rc [$body]"
		return 1
	}
}

# The first container with a published port on a fresh stand-in host: its
# bridge masquerade jump is in POSTROUTING before portmap makes the
# CNI-HOSTPORT-MASQ jump, which must still come first for hairpin traffic
# (portmap used to append it; later containers hid that). It also makes the
# shared chains, lane0's bridge and host-local's dir, as warm_up does for
# the other networks.
check_first_hairpin() {
	local rc=0
	pod run -d --name first --network lane0 -p 8081:80 "$image" httpd -f -p 80 -h /www >/dev/null || return 1
	until_ok 25 fetch_in first "http://$hostaddr:8081/" || rc=1
	pod rm -f -t 0 first >/dev/null || rc=1
	return "$rc"
}

# A container on each other network, then gone: from here on the shared
# chains, the bridges and host-local's network dirs exist, so state()
# before and after the containers compares only what belongs to them.
warm_up() {
	pod run --rm --network lane1 "$image" true &&
		pod run --rm --network lanmac "$image" true
}

check_run_p() {
	pod run -d --name web --network lane0 -p 8080:80 "$image" httpd -f -p 80 -h /www >/dev/null || return 1
	until_ok 25 fetch "http://$hostaddr:8080/" && fetch "http://127.0.0.1:8080/"
}

check_from_client() {
	fetch "http://$hostaddr:8080/" client
}

check_c2c() {
	local ip body
	ip=$(ipof web lane0) || return 1
	body=$(pod run --rm --network lane0 "$image" wget -qO- "http://$ip/") || return 1
	[ "$body" = "$page" ] || {
		echo "GET http://$ip/ from another container: [$body]"
		return 1
	}
}

check_hairpin() {
	fetch_in web "http://$hostaddr:8080/"
}

# network reload tears the attachment down and sets it up again, asking
# for the same address and MAC with IP= and MAC= in CNI_ARGS (libcni keeps
# them in its cache entry); host-local would otherwise hand out the next
# address.
check_reload() {
	local id ip mac ip2 mac2 cmac rules rules2 args
	id=$(pod inspect web --format '{{.Id}}') && ip=$(ipof web lane0) && mac=$(macof web lane0) || return 1
	rules=$(iptables-save -t nat | grep -c "$id")
	pod network reload web >/dev/null || return 1
	ip2=$(ipof web lane0) && mac2=$(macof web lane0) || return 1
	[ "$ip/$mac" = "$ip2/$mac2" ] || {
		echo "reload changed web's address: $ip $mac -> $ip2 $mac2"
		return 1
	}
	cmac=$(pod exec web cat /sys/class/net/eth0/address) || return 1
	[ "$cmac" = "$mac" ] || {
		echo "eth0 in the container has MAC $cmac, Podman says $mac"
		return 1
	}
	args=$(jq -c '[.cniArgs[] | select(.[0] == "IP" or .[0] == "MAC")] | sort' "/var/lib/cni/results/lane0-$id-eth0") || return 1
	[ "$args" = "[[\"IP\",\"$ip\"],[\"MAC\",\"$mac\"]]" ] || {
		echo "CNI_ARGS IP/MAC in libcni's cache: $args"
		return 1
	}
	rules2=$(iptables-save -t nat | grep -c "$id")
	[ "$rules" = "$rules2" ] || {
		echo "nat rules naming the container: $rules before reload, $rules2 after"
		return 1
	}
	[ "$(ls /var/lib/cni/networks/lane0 | grep -c '^[0-9]')" = 1 ] || {
		echo "leases on lane0 after reload: $(ls /var/lib/cni/networks/lane0)"
		return 1
	}
	fetch "http://$hostaddr:8080/" client
}

check_connect() {
	local id ip1 body
	pod network connect lane1 web || return 1
	id=$(pod inspect web --format '{{.Id}}') && ip1=$(ipof web lane1) || return 1
	[ -n "$ip1" ] || {
		echo "web has no address on lane1"
		return 1
	}
	pod exec web ip addr show eth1 | grep -q "inet $ip1/24" || {
		echo "no eth1 with $ip1 in web"
		return 1
	}
	[ -f "/var/lib/cni/networks/lane1/$ip1" ] && [ -f "/var/lib/cni/results/lane1-$id-eth1" ] || {
		echo "no lease or no cache entry for web on lane1"
		return 1
	}
	body=$(pod run --rm --network lane1 "$image" wget -qO- "http://$ip1/") || return 1
	[ "$body" = "$page" ] || {
		echo "GET http://$ip1/ on lane1: [$body]"
		return 1
	}
}

check_disconnect() {
	local id ip1 br
	id=$(pod inspect web --format '{{.Id}}') && ip1=$(ipof web lane1) || return 1
	br=$(jq -r '.plugins[0].bridge' "$netdir/lane1.conflist")
	pod network disconnect lane1 web || return 1
	if pod exec web ip link show eth1 >/dev/null 2>&1; then
		echo "eth1 is still in web"
		return 1
	fi
	[ ! -e "/var/lib/cni/networks/lane1/$ip1" ] && [ ! -e "/var/lib/cni/results/lane1-$id-eth1" ] || {
		echo "the lease $ip1 or the cache entry of eth1 is left"
		return 1
	}
	[ -z "$(ip -o link show master "$br")" ] || {
		echo "ports left on lane1's bridge $br: $(ip -o link show master "$br")"
		return 1
	}
	fetch "http://$hostaddr:8080/" client
}

check_macvlan() {
	local ip key
	pod run -d --name mweb --network lanmac "$image" httpd -f -p 80 -h /www >/dev/null || return 1
	ip=$(ipof mweb lanmac) || return 1
	# busybox's ip has no -d: look from outside, in the container's netns.
	key=$(pod inspect mweb --format '{{.NetworkSettings.SandboxKey}}') || return 1
	nsenter --net="$key" ip -d link show eth0 | grep -q 'macvlan mode bridge' || {
		echo "mweb's eth0 is not a macvlan: $(nsenter --net="$key" ip -d link show eth0)"
		return 1
	}
	until_ok 25 fetch "http://$ip/" client
}

# A pod: its infra container (Podman builds localhost/podman-pause from
# catatonit, no registry) holds the one network namespace of the pod. A
# port published on the pod reaches a member, a second member reaches the
# first at 127.0.0.1, and pod rm takes the attachment down (check_rm then
# finds nothing of it).
check_pod() {
	local body
	pod pod create --name lanepod --network lane0 -p 8081:80 >/dev/null || return 1
	pod run -d --pod lanepod --name podweb "$image" httpd -f -p 80 -h /www >/dev/null || return 1
	until_ok 25 fetch "http://$hostaddr:8081/" || return 1
	fetch "http://$hostaddr:8081/" client || return 1
	body=$(pod run --rm --pod lanepod "$image" wget -qO- http://127.0.0.1:80/) || return 1
	[ "$body" = "$page" ] || {
		echo "GET http://127.0.0.1:80/ from a second container of the pod: [$body]"
		return 1
	}
	pod pod rm -f -t 0 lanepod >/dev/null
}

check_rm() {
	local bad=()
	pod rm -f -t 0 web mweb >/dev/null || return 1
	state >"$work/state.after"
	diff -u "$work/state.before" "$work/state.after" || bad+=("the stand-in host differs from before the first container")
	[ -z "$(ip -o link show type veth | grep -v -e '^[0-9]*: lh0@' -e '^[0-9]*: mv0@')" ] || bad+=("veth left")
	[ -z "$(ls -A /var/lib/cni/results)" ] || bad+=("cache entries left: $(ls /var/lib/cni/results)")
	[ -z "$(ls /var/lib/cni/networks/* | grep '^[0-9]')" ] || bad+=("leases left")
	all_clear "${bad[@]}"
}

# Times of `podman run -p ... true` + `podman rm`, with the network and
# with --network none (printed, never asserted: the machine is shared).
timings() {
	local runs=$1 net t0 t1 i ms
	for net in lane0 none; do
		ms=()
		for i in $(seq "$runs"); do
			t0=$(date +%s%N)
			if [ "$net" = none ]; then
				pod run --name "t$i" --network none "$image" true && pod rm "t$i" >/dev/null || return 1
			else
				pod run --name "t$i" --network lane0 -p 8090:80 "$image" true && pod rm "t$i" >/dev/null || return 1
			fi
			t1=$(date +%s%N)
			ms+=($(((t1 - t0) / 1000000)))
		done
		echo "podman-lane: time: run -p 8090:80 true + rm, --network $net: $(median "${ms[@]}") ms median of $runs (${ms[*]})"
	done
}

finish() {
	echo "$passed $failed" >"$work/counts"
	exit 0
}

inner() {
	work=$1 runs=$2
	cnidir=$work/cni netdir=$work/net.d
	trap finish EXIT
	: >"$work/dropped"

	# Private mounts, inside the lane's mount namespace only.
	private_tmpfs && mkdir -p /var/lib/containers || {
		fail "private mounts"
		finish
	}
	# crun 1.8 refuses a hybrid cgroup layout.
	if mountpoint -q /sys/fs/cgroup/unified; then
		umount /sys/fs/cgroup/unified || fail "umount /sys/fs/cgroup/unified"
	fi

	# The stand-in host: lo, a link to the client netns (another machine),
	# and the macvlan parent mv0 whose peer is the client's eth1.
	client_netns &&
		ip link add mv0 type veth peer name eth1 netns client && ip link set mv0 up &&
		ip -n client addr add "$lanaddr/24" dev eth1 && ip -n client link set eth1 up || {
		fail "the stand-in host and the client netns"
		finish
	}

	export CONTAINERS_CONF=$work/containers.conf
	export CONTAINERS_STORAGE_CONF=$work/storage.conf
	export CONTAINERS_REGISTRIES_CONF=$work/registries.conf
	export TMPDIR=$work/tmp

	check "Podman runs with the CNI backend, plugins only from $cnidir" check_backend
	check "image built locally from busybox-static (podman import), runs" check_image
	check "podman network create: bridge lane0, lane1 and macvlan lanmac; every plugin cniforge's and answering VERSION" check_networks
	check "a missing plugin is noticed (Podman only warns and drops the network)" check_guard
	check "hairpin on a fresh host: the first container with a published port reaches it through the host" check_first_hairpin
	warm_up || fail "warm-up containers on lane1 and lanmac"
	state >"$work/state.before"
	check "podman run -p 8080:80 (busybox httpd), reached from the stand-in host ($hostaddr and 127.0.0.1)" check_run_p
	check "the published port reached from another netns" check_from_client
	check "container to container on lane0" check_c2c
	check "hairpin: a later container reaches its own published port through the host" check_hairpin
	check "podman network reload keeps address and MAC (IP= and MAC= in CNI_ARGS), rules and lease once" check_reload
	check "podman network connect lane1: eth1 with an address, a lease, a cache entry, reached from lane1" check_connect
	check "podman network disconnect lane1: eth1, lease, cache entry and bridge port gone" check_disconnect
	check "macvlan network (parent mv0): reached from the client netns on the LAN" check_macvlan
	check "a pod (infra from catatonit) publishing 8081: reached from the host and another netns; members share 127.0.0.1; pod rm" check_pod
	check "podman rm: no veth, rule, lease, cache entry or netns left on the stand-in host" check_rm
	[ "$runs" = 0 ] || timings "$runs" || fail "timings"
}

if [ "${1:-}" = --inner ]; then
	inner "$2" "$3"
	exit 0
fi

# --- the outer half: the real host --------------------------------------------

need_root
runs=3
if [ "${1:-}" = --runs ]; then
	runs=$2
fi
missing_tools podman crun conmon busybox jq unshare iptables-save ip6tables-save nft tc
[ ${#missing[@]} = 0 ] || bail "missing ${missing[*]} (.ci/run installs podman and crun)"

. scripts/host-snapshot.sh
work=$(mktemp -d /tmp/cniforge-podman.XXXXXX)
trap 'rm -rf "$work"' EXIT
watched=(/var/lib/containers /run/containers /run/libpod /run/crun /run/netns /etc/cni)
host_snapshot "$work/host.before" "${watched[@]}"

mkdir -p "$work/tmp" "$work/net.d"
bin/cniforge install --dir "$work/cni" >"$work/install.log" 2>&1 || {
	cat "$work/install.log" >&2
	bail "cniforge install --dir $work/cni"
}

# The image: busybox-static and its applet links, and a page for httpd.
busybox_rootfs "$work/rootfs" && tar -C "$work/rootfs" -cf "$work/rootfs.tar" . ||
	bail "the image's root folder (busybox-static, its applets, the page)"

# Within the hard limits: the defaults exceed them without CAP_SYS_RESOURCE.
nofile=$(ulimit -Hn) nproc=$(ulimit -Hu)
[ "$nofile" = unlimited ] || [ "$nofile" -gt 1048576 ] && nofile=1048576
[ "$nproc" = unlimited ] || [ "$nproc" -gt 4194304 ] && nproc=4194304
cat >"$work/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
# No cgroups for conmon and the containers: the lane owns no cgroup, and
# crun 1.8 refuses a hybrid layout.
cgroups = "disabled"

[network]
network_backend = "cni"
# Debian puts upstream's plugins in /usr/lib/cni, on Podman's default path.
cni_plugin_dirs = ["$work/cni"]
network_config_dir = "$work/net.d"

[engine]
cgroup_manager = "cgroupfs"
runtime = "crun"
events_logger = "none"
image_copy_tmp_dir = "$work/tmp"
EOF
cat >"$work/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "/var/lib/containers/storage"
runroot = "/run/containers/storage"
EOF
echo 'unqualified-search-registries = []' >"$work/registries.conf"

# A new pid namespace ends conmon and the containers with the lane; a new
# netns is the stand-in host; a private mount namespace holds the tmpfs
# mounts. --kill-child: if unshare is killed, so is the lane (timeout: a
# hung Podman must not hang test_linux.sh; the lane takes 1-5 minutes).
timeout --kill-after=30 1800 unshare --pid --fork --kill-child --mount-proc --mount --propagation private --net \
	bash "$self" --inner "$work" "$runs"
rc=$?
read -r passed failed <"$work/counts" 2>/dev/null || {
	passed=0 failed=0
	fail "the lane ended early (exit $rc)"
}

host_unchanged "$work" "links, addresses, routes, rules, netns, iptables, nft, /var/lib/cni, /var/lib/containers, /run/netns" "${watched[@]}"
if [ "$failed" != 0 ]; then
	echo "podman-lane: Podman's log:" >&2
	tail -n 60 "$work/podman.log" | sed 's/^/    /' >&2
fi
summary
[ "$failed" = 0 ]
