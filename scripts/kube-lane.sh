#!/usr/bin/env bash
# kube-lane.sh — a real Kubernetes cluster against our plugins: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, a kubelet and a
# runtime (containerd 2.4.2 from scripts/cri-deps.sh, or Debian's
# containerd 1.6), Kubernetes v1.34.4 and etcd built by scripts/kube-deps.sh.
# test_linux.sh runs it.
#
# The stages, one file each in scripts/kube/:
#   install.sh  the node starts with no plugin in its /opt/cni/bin and is
#               NotReady; our DaemonSet (deploy/cniforge-daemonset.yaml, its
#               image the node image loaded into the runtime) is applied with
#               kubectl, the kubelet runs it, it installs the plugins and the
#               node turns Ready. Always runs, first.
#   pods.sh     pods through the kubelet: a hostPort pod reached on the
#               node's address, bandwidth annotations as tbf on the host veth
#               and the ifb, pod to pod, pod to outside (masquerade),
#               deleting the pods leaves nothing; then a second rollout (a
#               new image tag) replaces the binaries while pods run.
#   proxy.sh    kube-proxy beside portmap: for portmap's backend iptables
#               and nftables (the conflist rewritten) x kube-proxy's
#               iptables and nftables modes, a NodePort Service (with the
#               node's address as externalIP) reached from a pod, the node
#               and outside while hostPort pods run, and hostPorts equal to
#               the Service's port and to its NodePort never capture its
#               traffic; kube-proxy --cleanup leaves none of its rules.
#   multus.sh   Multus v4.2.2 (the thin plugin, scripts/kube-deps.sh)
#               installed as a cluster does, delegating the default network
#               to the conflist and NetworkAttachmentDefinitions to our
#               macvlan, bridge, host-device with static and host-local
#               IPAM: the ips, mac, interface and cni-args requests, the
#               network-status annotation, traffic on each network,
#               cniforge gc beside Multus, deletion leaving nothing.
#   nodes.sh    two nodes: a second kubelet and runtime (node B) in its own
#               net and mount namespaces, joined by a veth link
#               (192.168.78.0/24), pod CIDR 10.88.1.0/24, each node routing
#               the other's; the DaemonSet rolls out on it and it turns
#               Ready; pods on the two nodes (nodeName) see each other's
#               own addresses (no NAT between pods: ipMasqExcludeCIDRs),
#               a pod still reaches the outside masqueraded; deletion
#               leaves both nodes as before; node B torn down.
#   crio.sh     (--runtime crio only) what CRI-O does with CNI that
#               containerd does not: CHECK right after every ADD and for
#               every pod when it restarts, GC at its start (a leaked
#               attachment and reservation reclaimed, live pods untouched),
#               bandwidth bursts of 34359738359 bits (clamped, tbf there),
#               hostPorts made by CRI-O itself with or without portmap.
#
# Isolation as in scripts/cri-lane.sh: the cluster runs in new pid, net,
# mount and cgroup namespaces (tmpfs on /run, /var/lib, /var/log, /var/tmp
# and /opt; a fresh sysfs); the pods' cgroups sit below a cgroup the lane
# makes (and removes) in each hierarchy, the root of its cgroup namespace.
# Every daemon listens on the stand-in node's own addresses. The real
# host is compared before and after (scripts/host-snapshot.sh).
#
# No registry: the workload and pause images are written by
# scripts/criimages, the node image by scripts/image, and imported with
# `ctr -n k8s.io images import`.
#
# Each stage is a file in scripts/kube/ (node.sh holds the node's daemons
# and the helpers every stage uses); the stages run in the order of
# $all_stages, after the install, on one cluster; each leaves the node as
# it found it.
#
# Each check prints "ok - ..." or "not ok - ..."; the lane closes with
# "kube-lane: N passed, M failed" (test_linux.sh adds it to its total) and
# exits non-zero on any failure.
#
#   scripts/kube-lane.sh [--runtime R] [--stages "S ..."] [--plugins DIR]
#     run as root after ./build_linux.sh
#   --runtime containerd2       containerd 2.4.2 (scripts/cri-deps.sh), the default
#   --runtime containerd1       Debian's containerd 1.6
#   --runtime crio              CRI-O v1.34.0 (scripts/crio-deps.sh), Debian's
#                               conmon and runc
#   --stages "pods ..."         the stages after the install (default: all)
#   --plugins DIR               a comparison run: DIR's plugins (upstream's, say
#                               /usr/lib/cni) copied into the node's /opt/cni/bin
#                               instead of our DaemonSet; checks of our own
#                               install are skipped
#   CNIFORGE_KUBE_KEEP=1        keep the lane's folder (logs) afterwards
set -uo pipefail
self=$(realpath "$0")
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lane.sh
. "$(dirname "$self")/lane.sh"

page="cniforge kube lane"
hostaddr=192.168.77.1 # the node's address, on the link to "outside"
clientaddr=192.168.77.2
net=k8s-pod-network
node=kube-lane-node
clustercidr=10.88.0.0/16 # the controller manager gives the node 10.88.0.0/24
podcidr=10.88.0.0/24
servicecidr=10.96.0.0/24
k8s_version=v1.34.4
etcd_version=v3.6.8

lane=kube-lane ok_prefix="ok - " fail_prefix="not ok - "
all_stages="pods proxy multus nodes crio"
runtime=containerd2 stages=$all_stages plugins_dir=
while [ $# -gt 0 ]; do
	case $1 in
	--runtime) runtime=$2 ;;
	--stages) stages=${2//,/ } ;;
	--plugins) plugins_dir=$(realpath "$2") ;;
	--inner) break ;;
	*) bail "kube-lane.sh: unknown argument $1 (see the comment at its top)" ;;
	esac
	shift 2
done
for s in $stages; do
	[ -f "scripts/kube/$s.sh" ] || bail "kube-lane.sh: no stage $s (scripts/kube/$s.sh); the stages: $all_stages"
done
case $runtime in
containerd2) runtime_label="containerd 2.4.2" ;;
containerd1) runtime_label="containerd $(containerd --version 2>/dev/null | awk '{print $3}' | sed 's/~.*//')" ;;
crio) runtime_label="CRI-O v1.34.0" ;;
*) bail "kube-lane.sh: no runtime $runtime (containerd2, containerd1, crio)" ;;
esac
# The runtime's daemon (its log: $pw/$runtime_daemon.log).
runtime_daemon=containerd
[ "$runtime" != crio ] || runtime_daemon=crio

# --- the inner half: the stand-in node ---------------------------------------

# Every stage file is sourced into this one shell: a function a second
# file defines again would silently replace the first.
dup=$(grep -ohE '^[a-zA-Z_0-9]+\(\)' scripts/lane.sh "$self" scripts/kube/*.sh | sort | uniq -d | tr '\n' ' ')
[ -z "$dup" ] || bail "kube-lane.sh: functions defined twice across scripts/kube/: $dup"

# shellcheck source=scripts/kube/node.sh
. scripts/kube/node.sh
# shellcheck source=scripts/kube/install.sh
. scripts/kube/install.sh
for s in $stages; do
	# shellcheck disable=SC1090 # one file per stage
	. "scripts/kube/$s.sh"
done

inner() {
	work=$1
	pw=$work/node
	cnidir=/opt/cni/bin
	sock=$pw/$runtime_daemon.sock
	mkdir -p "$pw/net.d"
	trap finish EXIT
	export PATH=$PWD/.cache/kube/$k8s_version:$PWD/.cache/kube/etcd-$etcd_version:$PWD/.cache/cri/crictl-v1.37.0:$PATH

	private_cgroups && private_tmpfs &&
		mount -t tmpfs -o mode=755 tmpfs /var/log &&
		mount -t tmpfs -o mode=755 tmpfs /opt || {
		fail "private mounts"
		finish
	}
	client_netns && ip -n client route del default || {
		fail "the stand-in node and the outside netns"
		finish
	}
	# The conflist a Kubernetes node carries, over the node's pod CIDR; its
	# plugins are what the DaemonSet installs.
	# containerd 1.6's libcni knows spec versions up to 1.0.0.
	# bridge leaves the cluster CIDR unmasqueraded (ipMasqExcludeCIDRs,
	# beyond upstream): pods on other nodes see a pod's own address.
	local v=1.1.0
	[ "$runtime" != containerd1 ] || v=1.0.0
	jq -n --arg v "$v" --arg net "$net" --arg subnet "$podcidr" --arg cluster "$clustercidr" '
	{cniVersion: $v, name: $net, plugins: [
	  {type: "bridge", bridge: "cni0", isGateway: true, ipMasq: true, ipMasqExcludeCIDRs: [$cluster], hairpinMode: true,
	   ipam: {type: "host-local", ranges: [[{subnet: $subnet}]], routes: [{dst: "0.0.0.0/0"}]}},
	  {type: "portmap", capabilities: {portMappings: true}, snat: true},
	  {type: "bandwidth", capabilities: {bandwidth: true}}]}' >"$pw/net.d/10-lane.conflist"
	# "Outside": a page on the client netns's address.
	mkdir -p "$pw/outside" && echo "$page" >"$pw/outside/index.html"
	ip netns exec client busybox httpd -p "$clientaddr:80" -h "$pw/outside"

	local t0=$SECONDS s
	check "certificates and keys (openssl)" certs
	check "etcd $etcd_version, kube-apiserver, kube-controller-manager, kube-scheduler $k8s_version start and answer" start_control_plane
	check "$runtime_label starts, the images (pause, workload, node) imported" start_runtime
	check "the kubelet starts and registers node $node" start_kubelet
	[ "$failed" = 0 ] || finish
	echo "kube-lane: time: the cluster up in $((SECONDS - t0)) s"
	stage_install
	echo "kube-lane: time: the node Ready $((SECONDS - t0)) s after the start"
	warm_up || fail "a warm-up pod (apply, delete)"
	state >"$pw/state.before"
	for s in $stages; do
		echo "kube-lane: stage $s ($runtime_label)"
		"stage_$s"
		echo "kube-lane: time: stage $s done $((SECONDS - t0)) s after the start"
	done
}

if [ "${1:-}" = --inner ]; then
	inner "$2"
	exit 0
fi
# --- the outer half: the real host --------------------------------------------

need_root
runtime_tools=
[ "$runtime" != crio ] || runtime_tools=conmon
# shellcheck disable=SC2086 # empty or one word
missing_tools runc catatonit busybox jq unshare nsenter tc iptables-save ip6tables-save nft openssl go $runtime_tools
[ ${#missing[@]} = 0 ] || bail "missing ${missing[*]}"
scripts/cri-deps.sh || bail "scripts/cri-deps.sh could not build crictl and containerd 2.x"
[ "$runtime" != crio ] || scripts/crio-deps.sh || bail "scripts/crio-deps.sh could not build CRI-O"
scripts/kube-deps.sh || bail "scripts/kube-deps.sh could not build Kubernetes $k8s_version and etcd $etcd_version"

. scripts/host-snapshot.sh
work=$(mktemp -d /tmp/cniforge-kube.XXXXXX)
if [ "${CNIFORGE_KUBE_KEEP:-}" = 1 ]; then
	echo "kube-lane: keeping $work"
else
	trap 'rm -rf "$work"' EXIT
fi
watched=(/var/lib/containerd /run/containerd /run/netns /etc/cni /opt/cni /var/lib/kubelet /var/log/pods /var/log/containers /etc/kubernetes
	/var/lib/crio /run/crio /etc/crio /var/log/crio /run/containers /usr/share/containers/oci)
host_snapshot "$work/host.before" "${watched[@]}"

busybox_rootfs "$work/rootfs" || bail "the workload image's root folder"
go run ./scripts/criimages -o "$work/images.tar" -rootfs "$work/rootfs" \
	-ref localhost/cniforge-lane:1 -catatonit "$(command -v catatonit)" \
	-pause-ref localhost/cniforge-pause:1 || bail "the image archive (scripts/criimages)"
go build -o "$work/image" ./scripts/image || bail "scripts/image"
for tag in lane1 lane2; do
	"$work/image" -bin bin/cniforge -arch "$(go env GOARCH)" -version "$tag" -epoch 0 \
		-tag "localhost/cniforge-node:$tag" -o "$work/node-$tag.tar" || bail "the node image $tag (scripts/image)"
done

# The lane's cgroup in each hierarchy, below the one it runs in: the root
# of the cgroup namespace the node runs in.
cgname=$(basename "$work")
cgdirs=()
while read -r type mp; do
	if [ "$type" = cgroup2 ]; then
		rel=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
	else
		sub=$(awk -v mp="$mp" '$2 == mp {print $4}' /proc/self/mounts | tr ',' '\n' | grep -Ev '^(rw|ro|relatime|nosuid|nodev|noexec|clone_children|xattr)$' | paste -sd,)
		rel=$(awk -F: -v s="$sub" '$2 == s {print $3}' /proc/self/cgroup)
	fi
	[ -n "$rel" ] || continue
	d=$mp${rel%/}/$cgname
	mkdir "$d" || bail "cgroup $d"
	[ ! -e "$d/cpuset.cpus" ] || { cat "$(dirname "$d")/cpuset.cpus" >"$d/cpuset.cpus" && cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems"; } || bail "cpuset of $d"
	cgdirs+=("$d")
done < <(awk '$3 ~ /^cgroup2?$/ && $2 ~ "^/sys/fs/cgroup" {print $3, $2}' /proc/self/mounts)

remove_cgroups() {
	local i d left
	for i in $(seq 50); do
		left=
		for d in "${cgdirs[@]}"; do
			[ -d "$d" ] || continue
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
			[ ! -d "$d" ] || left+="$d "
		done
		[ -n "$left" ] || return 0
		sleep 0.2
	done
	echo "$left"
	return 1
}

# New pid, net, mount and cgroup namespaces (the node); the subshell joins
# the lane's cgroups first. unshare ignores SIGTERM while it waits, so the
# timeout (a hung daemon must not hang test_linux.sh) kills.
(
	for d in "${cgdirs[@]}"; do
		echo "$BASHPID" >"$d/cgroup.procs" || exit 1
	done
	exec timeout -s KILL 900 unshare --pid --fork --kill-child --mount-proc --mount --propagation private --net --cgroup \
		bash "$self" --runtime "$runtime" --stages "$stages" ${plugins_dir:+--plugins "$plugins_dir"} --inner "$work"
)
rc=$?
if read -r p f sk <"$work/node/counts" 2>/dev/null; then
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + sk))
else
	fail "the node ended early (exit $rc)"
fi
if [ "$failed" != 0 ]; then
	for l in kubelet $runtime_daemon apiserver controller-manager scheduler etcd; do
		echo "kube-lane: $l's log:" >&2
		tail -n 25 "$work/node/$l.log" 2>/dev/null | sed 's/^/    /' >&2
	done
fi
if remove_cgroups >"$work/cgroups.left"; then
	ok "after the node, no cgroup of its pods is left ($cgname, below the lane's own)"
else
	fail "the lane's cgroups are left: $(cat "$work/cgroups.left")"
fi
host_unchanged "$work" "links, addresses, routes, rules, netns, iptables, nft, /var/lib/cni, ${watched[*]}" "${watched[@]}"
summary
[ "$failed" = 0 ]
