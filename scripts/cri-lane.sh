#!/usr/bin/env bash
# cri-lane.sh — Kubernetes' path to our plugins: containerd's CRI plugin,
# driven with crictl the way a kubelet drives it, runs a Kubernetes-shaped
# conflist through `cniforge install`ed plugins in a temporary plugin dir.
# Two passes: Debian's containerd 1.6 (with Debian's runc), then containerd
# 2.x (built by scripts/cri-deps.sh; it is the one that sends STATUS).
# test_linux.sh runs it.
#
# Isolation as in scripts/podman-lane.sh: each pass runs in a new network
# namespace (the stand-in node: cni0, the veths and every rule land there),
# a private mount namespace (tmpfs on /run, /var/lib and /var/tmp, where
# containerd, runc and libcni write whatever their config says, and a fresh
# sysfs for the new netns that keeps the cgroup tree) and a pid namespace
# that ends containerd, the shims and the pods with the pass. containerd
# gets `-c` on a config whose root, state, plugin dir, sockets and CNI dirs
# are in the lane's temporary folder; pods get a relative cgroup parent
# (runc makes it below the lane's own cgroup; the lane removes it). A
# second netns plays another machine on the node's LAN. The real host is
# compared before and after (scripts/host-snapshot.sh). What the two lanes
# share is in scripts/lane.sh.
#
# No registry: the workload image (busybox-static, httpd via `busybox
# httpd`) and the pause image (catatonit -P) are written as one archive by
# scripts/criimages and imported with `ctr -n k8s.io images import`.
#
# Each check prints "ok - ..." or "not ok - ..."; the lane closes with
# "cri-lane: N passed, M failed" (test_linux.sh adds it to its total) and
# exits non-zero on any failure. It also prints runp and stopp+rmp medians
# with the network and without (a pod in the node's network namespace runs
# no CNI), never asserted.
#
#   scripts/cri-lane.sh             run as root after ./build_linux.sh
#   scripts/cri-lane.sh --runs N    pods per median (default 3; 0: none)
#
#   CNIFORGE_CRI_RUNTIMES="1.6 2"   the passes to run (default both)
#   CNIFORGE_CRI_UPSTREAM=1         also time Debian's upstream plugins
#                                   (/usr/lib/cni) with the same conflist
#                                   at cniVersion 1.0.0
set -uo pipefail
self=$(realpath "$0")
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lane.sh
. "$(dirname "$self")/lane.sh"

page="cniforge cri lane"
hostaddr=192.168.77.1 # the stand-in node, on the link to the client netns
clientaddr=192.168.77.2
net=k8s-pod-network
# A small pod range, so that the range-full check fills it with a few pods.
subnet=10.88.0.0/24 range_start=10.88.0.10 range_end=10.88.0.15
ns=lane # the pods' Kubernetes namespace

lane=cri-lane ok_prefix="ok - " fail_prefix="not ok - "

# check DESCRIPTION FUNC ARGS...: one ok/not ok line (run_check in
# scripts/lane.sh), prefixed with the runtime; then containerd runs again
# if FUNC left it down.
check() {
	run_check "$label: $1" "$pw/check.log" "${@:2}"
	[ "$2" = start_containerd ] || ensure_containerd >/dev/null 2>&1 ||
		fail "$label: containerd does not start again"
}

cri() {
	local err rc=0
	err=$(mktemp "$pw/err.XXXXXX")
	crictl --config "$pw/crictl.yaml" "$@" 2>"$err" || rc=$?
	{
		echo "+ crictl $*"
		cat "$err"
	} >>"$pw/crictl.log"
	[ "$rc" = 0 ] || sed 's/^/crictl: /' "$err" >&2
	rm -f "$err"
	return "$rc"
}

# --- containerd --------------------------------------------------------------

start_containerd() {
	PATH=$rtpath "$containerd_bin" -c "$pw/containerd.toml" >>"$pw/containerd.log" 2>&1 &
	cpid=$!
	until_ok 150 cri info >/dev/null 2>&1 || {
		echo "containerd did not answer on $pw/containerd.sock; its log:"
		tail -n 30 "$pw/containerd.log"
		kill_containerd
		return 1
	}
}

# kill_containerd: SIGKILL, as a crash would; the shims and pods live on.
kill_containerd() {
	kill -KILL "$cpid" 2>/dev/null
	wait "$cpid" 2>/dev/null
	cpid=
}

# --- pods --------------------------------------------------------------------

# podconf NAME [HOSTPORT [BANDWIDTH [node]]]: a pod config (what a kubelet
# sends in RunPodSandbox) in $pw/NAME.pod.json. BANDWIDTH goes into both
# bandwidth annotations; "node" puts the pod in the node's network
# namespace (no CNI at all).
podconf() {
	local name=$1 port=${2:-} bw=${3:-} mode=${4:-}
	# runc sets no hostname in the node's UTS namespace (a kubelet's
	# hostNetwork pod shares it).
	jq -n --arg name "$name" --arg ns "$ns" --arg port "$port" --arg bw "$bw" --arg mode "$mode" --arg logs "$pw/logs" --arg cg "$cgparent" '
		{metadata: {name: $name, namespace: $ns, uid: ("uid-" + $name), attempt: 0},
		 log_directory: $logs,
		 annotations: (if $bw == "" then {} else
			{"kubernetes.io/ingress-bandwidth": $bw, "kubernetes.io/egress-bandwidth": $bw} end),
		 port_mappings: (if $port == "" then [] else
			[{protocol: 0, container_port: 80, host_port: ($port | tonumber)}] end),
		 linux: {cgroup_parent: $cg,
			security_context: {namespace_options: {network: (if $mode == "node" then 2 else 0 end)}}}}
		+ (if $mode == "node" then {} else {hostname: $name} end)' \
		>"$pw/$name.pod.json"
}

# runp NAME [HOSTPORT [BANDWIDTH [node]]]: RunPodSandbox; the pod ID on stdout.
runp() {
	podconf "$@"
	cri runp "$pw/$1.pod.json"
}

# ctrconf NAME ARGS...: a container config running ARGS in the lane's image.
ctrconf() {
	local name=$1
	shift
	printf '%s\n' "$@" | jq -R . | jq -s --arg name "$name" '{metadata: {name: $name},
		image: {image: "localhost/cniforge-lane:1"}, command: ., log_path: ($name + ".log"), linux: {}}' \
		>"$pw/$name.ctr.json"
}

# container POD PODNAME NAME ARGS...: create and start a container in POD.
container() {
	local pod=$1 podname=$2 name=$3 id
	shift 3
	ctrconf "$name" "$@"
	id=$(cri create "$pod" "$pw/$name.ctr.json" "$pw/$podname.pod.json") || return 1
	cri start "$id" >/dev/null || return 1
	echo "$id"
}

# rmpod ID: what a kubelet does to remove a pod: StopPodSandbox, then
# RemovePodSandbox (containerd runs the whole DEL chain at each).
rmpod() {
	cri stopp "$1" >/dev/null && cri rmp "$1" >/dev/null
}

inspectp() {
	cri inspectp -o json "$1"
}

pod_ip() {
	inspectp "$1" | jq -r .status.network.ip
}

pod_netns() {
	inspectp "$1" | jq -r '.info.runtimeSpec.linux.namespaces[] | select(.type == "network") | .path'
}

# host_veth POD: the node's end of the pod's eth0.
host_veth() {
	local nsp idx
	nsp=$(pod_netns "$1") || return 1
	idx=$(nsenter --net="$nsp" ip -j link show eth0 | jq -r '.[0].link_index') || return 1
	ip -j link show | jq -r --argjson i "$idx" '.[] | select(.ifindex == $i) | .ifname'
}

# fetch_in CTR URL: the page at URL, fetched from inside container CTR
# (ExecSync, as a kubelet's exec probe).
fetch_in() {
	local body rc=0
	body=$(cri exec -s "$1" timeout 5 wget -qO- "$2" 2>&1) || rc=$?
	[ "$rc" = 0 ] && [ "$body" = "$page" ] || {
		echo "GET $2 from container $1: exit $rc [$body]"
		return 1
	}
}

# same_state WHEN [IGNORE]: the node holds what it held before the first
# pod (state, in scripts/lane.sh; lines matching the regex IGNORE aside).
same_state() {
	local bad=() ignore=${2:-^\$}
	state | grep -Ev "$ignore" >"$pw/state.now"
	grep -Ev "$ignore" "$pw/state.before" | diff -u - "$pw/state.now" || bad+=("$1: the stand-in node differs from before the first pod")
	[ -z "$(ip -o link show type veth | grep -v '^[0-9]*: lh0@')" ] || bad+=("veth left")
	[ -z "$(ip -o link show type ifb)" ] || bad+=("ifb left")
	[ -z "$(ls -A /var/lib/cni/results 2>/dev/null | grep -Ev "$ignore")" ] || bad+=("libcni cache entries left: $(ls /var/lib/cni/results)")
	[ -z "$(ls /var/lib/cni/networks/$net | grep '^[0-9]')" ] || bad+=("host-local reservations left: $(ls /var/lib/cni/networks/$net | grep '^[0-9]')")
	all_clear "${bad[@]}"
}

# crash_and_drop_netns POD: containerd killed, then the pod's netns file
# unmounted and removed, as a crashed node agent or a cleanup script would
# leave it; the pause process still holds the namespace.
crash_and_drop_netns() {
	local nsp
	nsp=$(pod_netns "$1") || return 1
	kill_containerd
	umount "$nsp" && rm -f "$nsp"
}

# ensure_containerd: containerd runs (again, after a check that failed
# while it was down).
ensure_containerd() {
	[ -n "${cpid:-}" ] || start_containerd
}

# --- the checks --------------------------------------------------------------

check_ready() {
	local info
	info=$(cri info) || return 1
	jq -e '.status.conditions[] | select(.type == "NetworkReady") | .status == true' <<<"$info" >/dev/null || {
		jq .status <<<"$info"
		return 1
	}
	jq -e --arg d "$cnidir" '.config.cni.binDirs // [.config.cni.binDir] | index($d)' <<<"$info" >/dev/null || {
		echo "containerd's CNI bin dir is not $cnidir:"
		jq .config.cni <<<"$info"
		return 1
	}
}

# Every plugin the conflist names is cniforge's and answers VERSION with
# the conflist's cniVersion among those it supports.
check_plugins() {
	plugins_ours "$netdir/10-lane.conflist"
}

check_images() {
	"$ctr_bin" --address "$pw/containerd.sock" -n k8s.io images import --snapshotter overlayfs "$work/images.tar" >/dev/null || return 1
	local imgs
	imgs=$(cri images -o json | jq -r '.images[].repoTags[]') || return 1
	grep -qx localhost/cniforge-lane:1 <<<"$imgs" && grep -qx localhost/cniforge-pause:1 <<<"$imgs" || {
		echo "crictl images: $imgs"
		return 1
	}
}

# A pod up and down before state.before: from then on cni0, the shared
# chains and host-local's network dir exist, so the comparisons see only
# what belongs to pods.
warm_up() {
	local id
	id=$(runp warm 8089) && rmpod "$id"
}

# check_runp NAME HOSTPORT BANDWIDTH: the pod runs; the node's end of its
# veth has a tbf at the ingress rate, and an ifb shapes its egress.
check_runp() {
	local name=$1 port=$2 bw=$3 id veth ifb q rate
	id=$(runp "$name" "$port" "$bw") || return 1
	echo "$id" >"$pw/$name.id"
	veth=$(host_veth "$id") || return 1
	rate=${bw%M}Mbit
	q=$(tc qdisc show dev "$veth")
	grep -q "tbf .* rate $rate" <<<"$q" || {
		echo "no tbf at $rate on $veth: $q"
		return 1
	}
	# The pod's ifb, as bandwidth's result names it (libcni's cache).
	ifb=$(jq -r '.result.interfaces[].name | select(startswith("bwp"))' \
		"/var/lib/cni/results/$net-$id-eth0") || return 1
	q=$(tc qdisc show dev "$ifb")
	grep -q "tbf .* rate $rate" <<<"$q" || {
		echo "no tbf at $rate on the pod's ifb [$ifb]: $q"
		return 1
	}
}

podid() {
	cat "$pw/$1.id"
}

check_httpd() {
	local id
	id=$(container "$(podid web100)" web100 httpd httpd -f -p 80 -h /www) || return 1
	until_ok 25 fetch "http://$hostaddr:8083/" && fetch "http://127.0.0.1:8083/"
}

check_from_client() {
	fetch "http://$hostaddr:8083/" client
}

# A second pod with a shell container; it reaches the first pod's host port
# (through the node) and the first pod's address (pod to pod).
check_from_pod() {
	local pod id
	pod=$(runp other) || return 1
	echo "$pod" >"$pw/other.id"
	id=$(container "$pod" other sleeper sleep 3600) || return 1
	echo "$id" >"$pw/sleeper.id"
	fetch_in "$id" "http://$hostaddr:8083/"
}

check_pod2pod() {
	local ip
	ip=$(pod_ip "$(podid web100)") || return 1
	fetch_in "$(cat "$pw/sleeper.id")" "http://$ip/"
}

# The address crictl inspectp reports is the one on eth0 in the pod's
# netns and the one host-local reserved for the pod.
check_inspectp() {
	local id ip nsp addrs owner
	id=$(podid web100)
	ip=$(pod_ip "$id") && nsp=$(pod_netns "$id") || return 1
	[ -n "$ip" ] && [ "$ip" != null ] || {
		echo "inspectp has no address: $(inspectp "$id" | jq .status.network)"
		return 1
	}
	addrs=$(nsenter --net="$nsp" ip -j addr show eth0 | jq -r '.[0].addr_info[] | select(.family == "inet") | .local')
	[ "$addrs" = "$ip" ] || {
		echo "inspectp says $ip, eth0 in $nsp has [$addrs]"
		return 1
	}
	# host-local's reservation: the container ID and the ifname on two
	# lines ending in CRLF, as upstream writes it.
	owner=$(head -n 1 "/var/lib/cni/networks/$net/$ip" 2>&1 | tr -d '\r')
	[ "$owner" = "$id" ] || {
		echo "host-local's reservation of $ip: [$owner], want $id"
		return 1
	}
}

# stopp, then rmp: containerd runs the DEL chain at each (at rmp with no
# netns and no cached result); after stopp the node is as before.
check_stopp_rmp() {
	local n id rc=0 ids=()
	for n in web1 web10 web100 other; do
		[ ! -s "$pw/$n.id" ] || ids+=("$(podid "$n")")
	done
	for id in "${ids[@]}"; do
		cri stopp "$id" >/dev/null || rc=1
	done
	same_state "after stopp" || rc=1
	for id in "${ids[@]}"; do
		cri rmp "$id" >/dev/null || rc=1
	done
	[ -z "$(cri pods -q)" ] || {
		echo "pods left: $(cri pods)"
		rc=1
	}
	same_state "after rmp" || rc=1
	return "$rc"
}

# A pod orphaned by a crash: containerd killed, the pod's netns file gone
# (the pause process still holds the namespace); after a restart, stopp
# (DEL with an empty netns) and rmp leave nothing.
check_orphan() {
	local id
	id=$(runp orphan 8084 100M) || return 1
	crash_and_drop_netns "$id" || return 1
	start_containerd || return 1
	rmpod "$id" || return 1
	same_state "after the orphan's stopp and rmp"
}

# `cniforge gc --apply` while containerd is down reclaims a pod whose netns
# vanished; containerd's stopp and rmp afterwards still succeed. The lane
# runs in a pid namespace of its own, so gc cannot show on its own that it
# sees the runtime's mounts: --runtime-mount-ns says so (containerd made
# its netns files in this mount namespace).
check_gc() {
	local id out
	id=$(runp gcpod 8085 100M) || return 1
	crash_and_drop_netns "$id" || return 1
	out=$("$cnidir/cniforge" gc --apply --runtime-mount-ns --bin-dir "$cnidir" --conf-dir "$netdir" 2>&1) || {
		echo "cniforge gc --apply: $out"
		return 1
	}
	grep -q "DEL $id eth0" <<<"$out" || {
		echo "gc did not DEL $id: $out"
		"$cnidir/cniforge" ls --bin-dir "$cnidir" --conf-dir "$netdir"
		return 1
	}
	# containerd's own loopback network (cni-loopback, built in, in no
	# conflist) keeps its cache entry: gc knows only the networks of the
	# conf dir. It holds no kernel state; stopp removes it.
	same_state "after cniforge gc --apply" "/var/lib/cni/results/cni-loopback-|^cni-loopback-" || return 1
	start_containerd && rmpod "$id" && same_state "after the reclaimed pod's stopp and rmp"
}

# fill_range: pods until every address of the pod range is taken (their
# IDs in $pw/fill.ids).
fill_range() {
	local id i max
	for id in $(cri pods -q); do # left by a check that failed
		rmpod "$id"
	done
	max=$(($(echo "$range_end" | cut -d. -f4) - $(echo "$range_start" | cut -d. -f4) + 1))
	: >"$pw/fill.ids"
	for i in $(seq "$max"); do
		id=$(runp "fill$i") || {
			echo "pod $i of $max failed before the range was full"
			return 1
		}
		echo "$id" >>"$pw/fill.ids"
	done
}

# With the range full a new pod fails, with host-local's message.
check_full_runp() {
	local out
	podconf full
	if out=$(crictl --config "$pw/crictl.yaml" runp "$pw/full.pod.json" 2>&1); then
		echo "a pod ran with the range full: $out"
		echo "$out" >>"$pw/fill.ids"
		return 1
	fi
	grep -q "no IP addresses available" <<<"$out" || {
		echo "runp with the range full failed without saying so: $out"
		return 1
	}
	echo "$out" >"$pw/full.err"
}

# containerd 2.x runs STATUS through the conflist on every CRI Status call
# (a kubelet makes one every few seconds): a full range must not make the
# node NotReady.
check_full_ready() {
	local out
	out=$(cri info) || return 1
	jq -e '.status.conditions[] | select(.type == "NetworkReady") | .status == true' <<<"$out" >/dev/null || {
		echo "NetworkReady is not true with the range full:"
		jq -c '.status.conditions[] | select(.type == "NetworkReady")' <<<"$out"
		return 1
	}
}

check_full_drain() {
	local id rc=0
	for id in $(cat "$pw/fill.ids") $(cri pods -q); do
		# A failed runp may leave a NotReady sandbox behind.
		cri inspectp "$id" >/dev/null 2>&1 || continue
		rmpod "$id" || rc=1
	done
	same_state "after the range-full pods" || rc=1
	return "$rc"
}

# --- the node image and its DaemonSet (deploy/) -------------------------------

# dspod NAME: the DaemonSet's pod as a kubelet would run it: in the node's
# netns (hostNetwork: the node may have no working CNI yet), the node image
# (scripts/image) with the manifest's args, and the host folder containerd
# takes its plugins from ($cnidir, the node's /opt/cni/bin) mounted where
# the manifest mounts it. Prints the pod ID.
dspod() {
	local name=$1 pod id args
	args=$(sed -n 's/^ *args: //p' deploy/cniforge-daemonset.yaml | jq -c .) || return 1
	podconf "$name" "" "" node
	pod=$(cri runp "$pw/$name.pod.json") || return 1
	jq -n --arg name "$name" --argjson args "$args" --arg dir "$cnidir" '{metadata: {name: $name},
		image: {image: "localhost/cniforge-node:lane"}, args: $args, log_path: ($name + ".log"),
		mounts: [{container_path: "/host/opt/cni/bin", host_path: $dir}], linux: {}}' >"$pw/$name.ctr.json" &&
		id=$(cri create "$pod" "$pw/$name.ctr.json" "$pw/$name.pod.json") && cri start "$id" >/dev/null || return 1
	echo "$id" >"$pw/$name.ctrid"
	echo "$pod"
}

# check_daemonset: the image imported, its pod installs into the node's
# plugin folder (the files replaced, not edited), stays up, stops on the
# kubelet's SIGTERM; a second pod (a rollout) replaces them again while a
# runtime keeps exec'ing a plugin, which never fails; and a pod started
# afterwards gets its network from what it installed.
check_daemonset() {
	local ino0 ino1 ino2 pod1 pod2 web ip loop
	"$ctr_bin" --address "$pw/containerd.sock" -n k8s.io images import --snapshotter overlayfs "$work/node-image.tar" >/dev/null || return 1
	ino0=$(stat -c %i "$cnidir/cniforge")
	pod1=$(dspod ds1) || return 1
	until_ok 150 grep -q "installed into /host/opt/cni/bin" "$pw/logs/ds1.log" || {
		echo "the DaemonSet pod never said it installed; its log:"
		cat "$pw/logs/ds1.log"
		return 1
	}
	ino1=$(stat -c %i "$cnidir/cniforge")
	replaced_from_image "the DaemonSet pod" "$ino0" "$ino1" || return 1
	# A kubelet stops the containers (SIGTERM, then SIGKILL after the
	# grace period) before it stops the sandbox, which kills at once.
	cri stop --timeout 5 "$(cat "$pw/ds1.ctrid")" >/dev/null &&
		[ "$(cri inspect -o json "$(cat "$pw/ds1.ctrid")" | jq -r .status.exitCode)" = 0 ] &&
		grep -q "cniforge daemon: stopping" "$pw/logs/ds1.log" || {
		echo "the DaemonSet pod did not stop on SIGTERM with exit 0; its log:"
		cat "$pw/logs/ds1.log"
		return 1
	}
	rmpod "$pod1" || return 1

	exec_while_replaced ds
	loop=$!
	pod2=$(dspod ds2) || {
		touch "$pw/ds.stop"
		wait "$loop"
		return 1
	}
	until_ok 150 grep -q "installed into /host/opt/cni/bin" "$pw/logs/ds2.log"
	local rc=$?
	touch "$pw/ds.stop"
	wait "$loop"
	[ "$rc" = 0 ] || {
		echo "the second DaemonSet pod never said it installed; its log:"
		cat "$pw/logs/ds2.log"
		return 1
	}
	ino2=$(stat -c %i "$cnidir/cniforge")
	replaced_from_image "the second pod" "$ino1" "$ino2" || return 1
	no_exec_failed ds "the DaemonSet" || return 1

	web=$(runp dsweb) || return 1
	ip=$(pod_ip "$web")
	[ -n "$ip" ] && [ "$ip" != null ] || {
		echo "the pod started after the DaemonSet got no address: $(inspectp "$web" | jq -c .status.network)"
		return 1
	}
	rmpod "$web" && rmpod "$pod2" || return 1
	same_state "after the DaemonSet's pods"
}

# timings RUNS WHAT: runp and stopp+rmp medians of RUNS pods with a host
# port, and of RUNS pods in the node's netns (no CNI). Printed, never
# asserted: the machine is shared.
timings() {
	local runs=$1 what=$2 mode i t0 t1 t2 id up down
	for mode in pod node; do
		up=() down=()
		for i in $(seq "$runs"); do
			if [ "$mode" = node ]; then
				podconf "t$i" "" "" node
			else
				podconf "t$i" 8090
			fi
			t0=$(date +%s%N)
			id=$(cri runp "$pw/t$i.pod.json") || return 1
			t1=$(date +%s%N)
			rmpod "$id" || return 1
			t2=$(date +%s%N)
			up+=($(((t1 - t0) / 1000000)))
			down+=($(((t2 - t1) / 1000000)))
		done
		local how="network (a hostPort)"
		[ "$mode" = pod ] || how="node netns (no CNI)"
		echo "cri-lane: time: $label, $what, $how: runp $(median "${up[@]}") ms, stopp+rmp $(median "${down[@]}") ms (medians of $runs; runp ${up[*]}; stopp+rmp ${down[*]})"
	done
}

finish() {
	[ -z "${cpid:-}" ] || kill_containerd
	echo "$passed $failed" >"$pw/counts"
	exit 0
}

inner() {
	work=$1 pass=$2 runs=$3
	pw=$work/$pass
	. "$pw/env"
	cnidir=$work/cni netdir=$pw/net.d
	trap finish EXIT

	# Private mounts, inside the lane's mount namespace only. A fresh sysfs
	# shows the new netns's links (containerd and runc read /sys); the
	# cgroup tree is moved over from the old one.
	mkdir -p "$pw/cgroup" &&
		mount --rbind /sys/fs/cgroup "$pw/cgroup" &&
		mount -t sysfs sysfs /sys &&
		mount --rbind "$pw/cgroup" /sys/fs/cgroup &&
		umount -l "$pw/cgroup" &&
		private_tmpfs || {
		fail "$label: private mounts"
		finish
	}

	# The stand-in node: lo and a link to the client netns (another machine).
	client_netns || {
		fail "$label: the stand-in node and the client netns"
		finish
	}

	check "containerd starts with -c on the lane's config and answers crictl" start_containerd
	[ -n "${cpid:-}" ] || finish
	check "CRI status: NetworkReady true, plugin dir $cnidir" check_ready
	check "every plugin of the conflist is cniforge's and answers VERSION $(jq -r .cniVersion "$netdir/10-lane.conflist")" check_plugins
	check "images (busybox-static, catatonit -P pause) imported with ctr, listed by crictl images" check_images
	warm_up || fail "$label: a warm-up pod (runp, stopp, rmp)"
	state >"$pw/state.before"
	check "runp, hostPort 8081, bandwidth annotations 1M: tbf on the veth and the ifb" check_runp web1 8081 1M
	check "runp, hostPort 8082, bandwidth annotations 10M: tbf on the veth and the ifb" check_runp web10 8082 10M
	check "runp, hostPort 8083, bandwidth annotations 100M: tbf on the veth and the ifb" check_runp web100 8083 100M
	check "httpd in the 100M pod reached on hostPort 8083 from the node ($hostaddr and 127.0.0.1)" check_httpd
	check "the hostPort reached from another netns" check_from_client
	check "the hostPort reached from a second pod" check_from_pod
	check "pod to pod" check_pod2pod
	check "the pod's address from crictl inspectp is on its eth0 and host-local reserved it for the pod" check_inspectp
	check "stopp then rmp (DEL twice): no veth, rule, qdisc, ifb, reservation or libcni cache entry left" check_stopp_rmp
	check "a pod orphaned by killing containerd and removing its netns: stopp and rmp after a restart leave nothing" check_orphan
	check "cniforge gc --apply reclaims a pod whose netns vanished while containerd was down" check_gc
	if fill_range >"$pw/check.log" 2>&1; then
		check "the pod range full ($range_start-$range_end): a new pod fails saying no address is available" check_full_runp
		[ "$version" = 1.6 ] ||
			check "the pod range full: crictl info keeps NetworkReady true (STATUS runs on every CRI Status call)" check_full_ready
	else
		fail "$label: filling the pod range ($range_start-$range_end) with pods"
		sed 's/^/    /' "$pw/check.log" >&2
	fi
	check "the range-full pods stopped and removed: nothing left" check_full_drain
	check "the node image's DaemonSet pod (deploy/) installs into the node's plugin folder, stops on SIGTERM; a second one replaces the files while a plugin is exec'd; a pod started after gets its network" check_daemonset
	if [ "$runs" != 0 ]; then
		timings "$runs" cniforge || fail "$label: timings"
		if [ "${CNIFORGE_CRI_UPSTREAM:-}" = 1 ]; then
			# Debian's upstream plugins (1.1.1) stop at cniVersion 1.0.0.
			kill_containerd
			sed -i "s|$cnidir|/usr/lib/cni|" "$pw/containerd.toml"
			jq '.cniVersion = "1.0.0"' "$netdir/10-lane.conflist" >"$pw/conflist.tmp" &&
				mv "$pw/conflist.tmp" "$netdir/10-lane.conflist"
			start_containerd && timings "$runs" "upstream plugins (/usr/lib/cni, cniVersion 1.0.0)" ||
				fail "$label: upstream timings"
		fi
	fi
}

if [ "${1:-}" = --inner ]; then
	inner "$2" "$3" "$4"
	exit 0
fi

# --- the outer half: the real host --------------------------------------------

need_root
runs=3
if [ "${1:-}" = --runs ]; then
	runs=$2
fi
passes=${CNIFORGE_CRI_RUNTIMES:-1.6 2}

missing_tools containerd ctr runc catatonit busybox jq unshare nsenter tc iptables-save ip6tables-save nft go
[ ${#missing[@]} = 0 ] || bail "missing ${missing[*]} (.ci/run installs containerd and runc)"
deps=crictl
[[ " $passes " != *" 2 "* ]] || deps+=" containerd2"
scripts/cri-deps.sh $deps || bail "scripts/cri-deps.sh could not build crictl and containerd 2.x"
export PATH=$PWD/.cache/cri/crictl-v1.37.0:$PATH

. scripts/host-snapshot.sh
work=$(mktemp -d /tmp/cniforge-cri.XXXXXX)
trap 'rm -rf "$work"' EXIT
watched=(/var/lib/containerd /run/containerd /run/netns /etc/cni /opt/cni)
# The pods' cgroup parent, relative (below the lane's own cgroup), one per run.
cgparent=$(basename "$work")
export cgparent
host_snapshot "$work/host.before" "${watched[@]}"

bin/cniforge install --dir "$work/cni" >"$work/install.log" 2>&1 || {
	cat "$work/install.log" >&2
	bail "cniforge install --dir $work/cni"
}

# The images, one archive for ctr (scripts/criimages): busybox-static
# with its applet links and a page for httpd, and catatonit as the pause
# image.
busybox_rootfs "$work/rootfs" || bail "the workload image's root folder (busybox-static, its applets, the page)"
go run ./scripts/criimages -o "$work/images.tar" -rootfs "$work/rootfs" \
	-ref localhost/cniforge-lane:1 -catatonit "$(command -v catatonit)" \
	-pause-ref localhost/cniforge-pause:1 || bail "the image archive (scripts/criimages)"

# The node image (scripts/image) of the binary just installed, as
# scripts/release.sh writes it for the DaemonSet in deploy/.
go run ./scripts/image -bin bin/cniforge -arch "$(go env GOARCH)" -version lane -epoch 0 \
	-tag localhost/cniforge-node:lane -o "$work/node-image.tar" || bail "the node image (scripts/image)"

# The conflist a Kubernetes node carries (cniVersion per pass).
conflist() {
	jq -n --arg v "$1" --arg net "$net" --arg subnet "$subnet" --arg s "$range_start" --arg e "$range_end" '
	{cniVersion: $v, name: $net, plugins: [
	  {type: "bridge", bridge: "cni0", isGateway: true, ipMasq: true, hairpinMode: true,
	   ipam: {type: "host-local", ranges: [[{subnet: $subnet, rangeStart: $s, rangeEnd: $e}]],
	          routes: [{dst: "0.0.0.0/0"}]}},
	  {type: "portmap", capabilities: {portMappings: true}, snat: true},
	  {type: "bandwidth", capabilities: {bandwidth: true}},
	  {type: "tuning"},
	  {type: "firewall"}]}'
}

# One configuration per pass: containerd's own config (everything in the
# pass's folder), the conflist, crictl's endpoint.
setup_pass() {
	local pass=$1 pw=$work/$1
	mkdir -p "$pw/net.d" "$pw/logs" "$pw/bin"
	cat >"$pw/crictl.yaml" <<-EOF
		runtime-endpoint: unix://$pw/containerd.sock
		image-endpoint: unix://$pw/containerd.sock
		timeout: 30
	EOF
	case $pass in
	1.6)
		conflist 1.0.0 >"$pw/net.d/10-lane.conflist"
		cat >"$pw/env" <<-EOF
			label="containerd $(containerd --version | awk '{print $3}' | sed 's/~.*//')"
			version=1.6
			containerd_bin=$(command -v containerd)
			ctr_bin=$(command -v ctr)
			rtpath=$PATH
		EOF
		containerd16_toml "$work/cni" >"$pw/containerd.toml"
		;;
	2)
		local d=$PWD/.cache/cri/containerd-v2.4.2
		conflist 1.1.0 >"$pw/net.d/10-lane.conflist"
		# containerd 2.x looks for its shim on PATH before beside itself.
		ln -s "$d/containerd-shim-runc-v2" "$pw/bin/containerd-shim-runc-v2"
		cat >"$pw/env" <<-EOF
			label="containerd $("$d/containerd" --version | awk '{print $3}' | sed 's/+.*//')"
			version=2
			containerd_bin=$d/containerd
			ctr_bin=$d/ctr
			rtpath=$pw/bin:$PATH
		EOF
		containerd2_toml "$work/cni" >"$pw/containerd.toml"
		;;
	*)
		return 1
		;;
	esac
}

# remove_cgroups: the pods' cgroups (under the relative parent $cgparent,
# which runc makes below its own cgroup in each hierarchy), once the pid
# namespace has ended their processes; the kernel may still be reaping
# them, hence the retries. Whatever is left is listed.
remove_cgroups() {
	local i d
	for i in $(seq 25); do
		for d in $(find /sys/fs/cgroup -type d -name "$cgparent" 2>/dev/null); do
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
		done
		[ -n "$(find /sys/fs/cgroup -type d -name "$cgparent" 2>/dev/null)" ] || return 0
		sleep 0.2
	done
	find /sys/fs/cgroup -type d -name "$cgparent"
	return 1
}

for pass in $passes; do
	setup_pass "$pass" || {
		fail "containerd $pass: no such pass (CNIFORGE_CRI_RUNTIMES takes 1.6 and 2)"
		continue
	}
	# A new pid namespace ends containerd, the shims and the pods with the
	# pass; a new netns is the stand-in node; a private mount namespace
	# holds the tmpfs mounts. unshare ignores SIGTERM while it waits, so
	# the timeout (a hung containerd must not hang test_linux.sh) kills.
	timeout -s KILL 600 unshare --pid --fork --kill-child --mount-proc --mount --propagation private --net \
		bash "$self" --inner "$work" "$pass" "$runs"
	rc=$?
	if read -r p f <"$work/$pass/counts" 2>/dev/null; then
		passed=$((passed + p)) failed=$((failed + f))
	else
		fail "containerd $pass: the pass ended early (exit $rc)"
	fi
	if remove_cgroups >"$work/cgroups.left"; then
		ok "containerd $pass: after the pass, no cgroup of its pods is left (parent $cgparent, below the lane's own)"
	else
		fail "containerd $pass: the pods' cgroups ($cgparent) are left:"
		sed 's/^/    /' "$work/cgroups.left" >&2
	fi
	if [ -n "$(awk '$2 != 0' "$work/$pass/counts" 2>/dev/null)" ] || [ ! -s "$work/$pass/counts" ]; then
		echo "cri-lane: containerd $pass's log:" >&2
		tail -n 40 "$work/$pass/containerd.log" 2>/dev/null | sed 's/^/    /' >&2
	fi
done

host_unchanged "$work" "links, addresses, routes, rules, netns, iptables, nft, /var/lib/cni, /var/lib/containerd, /run/containerd, /run/netns, /etc/cni, /opt/cni" "${watched[@]}"
summary
[ "$failed" = 0 ]
