# multus.sh — stage 4 of the Kubernetes lane (scripts/kube-lane.sh): Multus
# (the thin plugin v4.2.2, scripts/kube-deps.sh) installed as a cluster
# installs it, delegating the default network to the lane's conflist and
# secondary networks (NetworkAttachmentDefinitions) to our macvlan, bridge
# and host-device with static and host-local IPAM; the network-selection
# annotation's ips, mac, interface and cni-args requests; traffic on each
# network; cniforge gc beside Multus; deleting the pods leaves nothing.
#
# ipvlan is not among the networks: it needs the ipvlan kernel module, which
# this host's kernel lacks (and the VM lane, whose kernel has it, cannot run
# Kubernetes).
#
# Every stage file is sourced into one shell: this one's names begin with
# mu_ (a check_delete here once replaced pods.sh's).
# shellcheck shell=bash disable=SC2154 # set by kube-lane.sh

multus_version=v4.2.2
multus_dir=/var/lib/cni/multus # Multus's cniDir (its default)
mv_master=mvm0 hd_dev=hdv0     # the masters, veth ends in the node's netns
hd_peer_addr=10.78.0.1         # the node's end of host-device's veth

# The NetworkAttachmentDefinition CRD, from the Network Plumbing WG's
# multi-net spec: group k8s.cni.cncf.io, v1, namespaced, spec.config the
# network's CNI config as a string.
mu_nad_crd() {
	cat <<-'EOF'
		apiVersion: apiextensions.k8s.io/v1
		kind: CustomResourceDefinition
		metadata:
		  name: network-attachment-definitions.k8s.cni.cncf.io
		spec:
		  group: k8s.cni.cncf.io
		  scope: Namespaced
		  names:
		    plural: network-attachment-definitions
		    singular: network-attachment-definition
		    kind: NetworkAttachmentDefinition
		    shortNames: [net-attach-def]
		  versions:
		  - name: v1
		    served: true
		    storage: true
		    schema:
		      openAPIV3Schema:
		        type: object
		        properties:
		          apiVersion: {type: string}
		          kind: {type: string}
		          metadata: {type: object}
		          spec:
		            type: object
		            properties:
		              config: {type: string}
	EOF
}

mu_check_crd() {
	mu_nad_crd >"$pw/nad-crd.yaml" &&
		k apply -f "$pw/nad-crd.yaml" >/dev/null &&
		k wait --for=condition=Established crd/network-attachment-definitions.k8s.cni.cncf.io --timeout 60s
}

# mu_nad NAME CONFIG: a NetworkAttachmentDefinition in default.
mu_nad() {
	jq -n --arg name "$1" --arg config "$2" '{apiVersion: "k8s.cni.cncf.io/v1",
	  kind: "NetworkAttachmentDefinition", metadata: {name: $name, namespace: "default"},
	  spec: {config: $config}}' | k apply -f - >/dev/null
}

# The masters (veth pairs: this kernel has no dummy) and the networks:
#   macvlan-net  our macvlan on mvm0 (bridge mode), static IPAM from the
#                annotation's ips (capabilities ips, mac)
#   bridge-net   our bridge br-multus, host-local 10.99.0.0/24
#   hostdev-net  our host-device moving hdv0 into the pod, static IPAM from
#                args.cni.ips (the annotation's cni-args)
mu_check_networks() {
	local v=1.1.0
	[ "$runtime" != containerd1 ] || v=1.0.0
	ip link add "$mv_master" type veth peer name "${mv_master}p" &&
		ip link set "$mv_master" up && ip link set "${mv_master}p" up &&
		ip link add "$hd_dev" type veth peer name "${hd_dev}p" &&
		ip addr add "$hd_peer_addr/24" dev "${hd_dev}p" && ip link set "${hd_dev}p" up || return 1
	# The node serves the page on host-device's peer, for the pod to fetch.
	daemon hd-httpd busybox httpd -f -p "$hd_peer_addr:80" -h "$pw/outside"
	mu_nad macvlan-net "$(jq -nc --arg v "$v" --arg m "$mv_master" '{cniVersion: $v, name: "macvlan-net",
	  type: "macvlan", master: $m, mode: "bridge", capabilities: {ips: true, mac: true},
	  ipam: {type: "static"}}')" &&
		mu_nad bridge-net "$(jq -nc --arg v "$v" '{cniVersion: $v, name: "bridge-net",
	  plugins: [{type: "bridge", bridge: "br-multus",
	    ipam: {type: "host-local", ranges: [[{subnet: "10.99.0.0/24"}]]}}]}')" &&
		mu_nad hostdev-net "$(jq -nc --arg v "$v" --arg d "$hd_dev" '{cniVersion: $v, name: "hostdev-net",
	  type: "host-device", device: $d, ipam: {type: "static"}}')" &&
		k get net-attach-def -o name
}

# Multus as a cluster installs it (its DaemonSet's thin entrypoint does
# this): the binary into the node's plugin folder, a kubeconfig for it in
# multus.d, and 00-multus.conf first in the conf folder, so the runtime
# calls Multus for every pod. The default network is the lane's conflist,
# named: Multus v4.2.2 given the conflist's path strips the plugins' own
# keys on DEL (multus-cni#1449).
mu_check_install_multus() {
	local m=$PWD/.cache/kube/multus-$multus_version/multus
	mkdir -p "$pw/net.d/multus.d" &&
		cp "$pw/admin.kubeconfig" "$pw/net.d/multus.d/multus.kubeconfig" &&
		cp "$m" "$cnidir/multus.tmp" && mv "$cnidir/multus.tmp" "$cnidir/multus" || return 1
	jq -n --arg d "$pw/net.d" --arg net "$net" --arg log "$pw/multus.log" --arg c "$multus_dir" '{
	  cniVersion: "1.0.0", name: "multus-cni-network", type: "multus",
	  kubeconfig: ($d + "/multus.d/multus.kubeconfig"), confDir: $d, cniDir: $c,
	  binDir: "/opt/cni/bin", clusterNetwork: $net,
	  capabilities: {portMappings: true, bandwidth: true},
	  logFile: $log, logLevel: "verbose"}' >"$pw/net.d/00-multus.conf.tmp" &&
		mv "$pw/net.d/00-multus.conf.tmp" "$pw/net.d/00-multus.conf" || return 1
	"$cnidir/multus" -version
}

# mu_mpod NAME NETWORKS: a pod running httpd with the network-selection
# annotation NETWORKS (JSON).
mu_mpod() {
	pod "$1" --annotation "k8s.v1.cni.cncf.io/networks=$2" -- httpd -f -p 80 -h /www || {
		tail -n 20 "$pw/multus.log"
		return 1
	}
}

# mu_pod_netns POD: the pod's netns path (the kubelet made it; crictl reads it).
mu_pod_netns() {
	cri inspectp -o json "$(sandbox "$1")" |
		jq -r '.info.runtimeSpec.linux.namespaces[] | select(.type == "network") | .path'
}

# mu_pod_links POD: "ifname mac addr/len..." per link of POD's netns but lo,
# read over netlink (ip -j) from the node.
mu_pod_links() {
	local nsp
	nsp=$(mu_pod_netns "$1") && [ -n "$nsp" ] || return 1
	nsenter --net="$nsp" ip -j addr show | jq -r '.[] | select(.ifname != "lo") |
	  [.ifname, .address, ([.addr_info[] | select(.family == "inet") | "\(.local)/\(.prefixlen)"] | join(","))] | join(" ")' | sort
}

# mu_status POD: the pod's network-status annotation, one line per network:
# "name interface ips mac default".
mu_status() {
	k get pod "$1" -o json | jq -r '.metadata.annotations["k8s.v1.cni.cncf.io/network-status"] // "[]" | fromjson[] |
	  [.name, .interface, (.ips // [] | join(",")), .mac, (.default // false | tostring)] | join(" ")' | sort
}

# mu_expect_links POD WANT: POD's links are WANT, lines "ifname mac addrs"
# in ifname order, each a glob (eth0's address is host-local's).
mu_expect_links() {
	local got g w i=0
	got=$(mu_pod_links "$1") || return 1
	mapfile -t g <<<"$got"
	mapfile -t w <<<"$2"
	[ ${#g[@]} = ${#w[@]} ] || i=-1
	while [ "$i" -ge 0 ] && [ "$i" -lt ${#w[@]} ]; do
		# shellcheck disable=SC2053 # WANT's lines are globs
		[[ ${g[i]} == ${w[i]} ]] || i=-2
		i=$((i + 1))
	done
	[ "$i" -ge 0 ] || {
		printf 'pod %s has:\n%s\nwant:\n%s\n' "$1" "$got" "$2"
		return 1
	}
	echo "pod $1: ${got//$'\n'/; }"
}

mu_mac=02:42:0a:4d:00:0a

mu_check_pods() {
	mu_mpod mpa '[{"name": "macvlan-net", "interface": "mv1", "ips": ["10.77.0.10/24"], "mac": "'$mu_mac'"},
	  {"name": "bridge-net"}]' &&
		mu_mpod mpb '[{"name": "macvlan-net", "ips": ["10.77.0.11/24"]},
	  {"name": "bridge-net", "interface": "br1"},
	  {"name": "hostdev-net", "interface": "hd1", "cni-args": {"ips": ["10.78.0.2/24"]}}]'
}

# The pods hold exactly what they asked for: the interface names, the
# requested MAC and addresses, a host-local address on bridge-net, and
# nothing more; host-device's hdv0 left the node for mpb.
mu_check_exact() {
	local hdmac
	hdmac=$(ip -j link show "${hd_dev}p" | jq -r '.[0].address') # the peer's, to tell hdv0 apart
	mu_expect_links mpa "eth0 * 10.88.0.+([0-9])/24
mv1 $mu_mac 10.77.0.10/24
net2 * 10.99.0.+([0-9])/24" || return 1
	mu_expect_links mpb "br1 * 10.99.0.+([0-9])/24
eth0 * 10.88.0.+([0-9])/24
hd1 * 10.78.0.2/24
net1 * 10.77.0.11/24" || return 1
	! ip link show "$hd_dev" >/dev/null 2>&1 || {
		echo "$hd_dev is still in the node's netns"
		return 1
	}
	echo "(${hd_dev}p $hdmac)"
}

# mu_expect_status POD: the network-status annotation lists every network of
# the pod: the default one (default: true) and each secondary one, with
# the interface, addresses and MAC the pod's netns holds.
mu_expect_status() {
	local want got
	want=$(mu_pod_links "$1" | awk '{gsub(/\/[0-9]+/, "", $3); print $1, $2, $3}') || return 1
	got=$(mu_status "$1")
	local n=0 line ifn mac ips name d
	while read -r ifn mac ips; do
		n=$((n + 1))
		case $ifn in
		eth0) name=$net d=true ;;
		mv1 | net1) name=default/macvlan-net d=false ;;
		net2 | br1) name=default/bridge-net d=false ;;
		hd1) name=default/hostdev-net d=false ;;
		*) name=? d=? ;;
		esac
		line="$name $ifn $ips $mac $d"
		grep -qxF "$line" <<<"$got" || {
			printf 'pod %s: network-status has no [%s]; it has:\n%s\n' "$1" "$line" "$got"
			return 1
		}
	done <<<"$want"
	[ "$(wc -l <<<"$got")" = "$n" ] || {
		printf 'pod %s: network-status lists %s networks, the pod has %s:\n%s\n' "$1" "$(wc -l <<<"$got")" "$n" "$got"
		return 1
	}
	echo "pod $1: ${got//$'\n'/; }"
}

mu_check_status() {
	mu_expect_status mpa && mu_expect_status mpb
}

mu_pod_addr() { # POD IFNAME: its IPv4 address
	mu_pod_links "$1" | awk -v i="$2" '$1 == i {sub(/\/.*/, "", $3); print $3}'
}

# Traffic on every network: mpb fetches mpa's page over macvlan and over
# bridge-net, and the node's over host-device; the node fetches mpb's over
# host-device; the default network still carries pod to pod.
mu_check_traffic() {
	local br
	br=$(mu_pod_addr mpa net2)
	in_pod mpb http://10.77.0.10/ &&
		in_pod mpb "http://$br/" &&
		in_pod mpb "http://$hd_peer_addr/" &&
		fetch http://10.78.0.2/ &&
		in_pod mpb "http://$(pod_ip mpa)/" || return 1
	echo "mpb -> mpa over macvlan (10.77.0.10), bridge-net ($br), eth0 ($(pod_ip mpa)); mpb <-> node over host-device"
}

# mu_state: Multus's cache, host-local's reservations on bridge-net and
# the pods' links: what gc must keep while the pods live.
mu_state() {
	find "$multus_dir" /var/lib/cni/networks/bridge-net /var/lib/cni/results -type f -printf '%p\n' 2>/dev/null | sort
	local p
	for p in mpa mpb; do
		mu_pod_links "$p"
	done
}

# cniforge: the node tool, the installed one (a comparison run with another
# suite's plugins has none in $cnidir: then the build's).
mu_cniforge() {
	local c=$cnidir/cniforge
	[ -x "$c" ] || c=$PWD/bin/cniforge
	"$c" "$@"
}

mu_gc() {
	mu_cniforge gc --conf-dir "$pw/net.d" --multus-dir "$multus_dir" --runtime-mount-ns "$@"
}

# cniforge gc while the Multus pods live: it keeps them whole.
mu_check_gc_live() {
	local before
	before=$(mu_state)
	grep -q "^$multus_dir/" <<<"$before" || {
		echo "Multus wrote no cache in $multus_dir:"
		echo "$before"
		return 1
	}
	# A copy of Multus's cache as Multus wrote it (kept with the lane's folder).
	rm -rf "$pw/multus-cache" && cp -a "$multus_dir" "$pw/multus-cache"
	mu_gc --apply --min-age 0s || return 1
	[ "$(mu_state)" = "$before" ] || {
		echo "gc changed what the Multus pods hold:"
		diff <(echo "$before") <(mu_state)
		return 1
	}
	# A here-string, not a pipe: under pipefail, grep -q's early exit
	# would fail the check on ls's EPIPE.
	local ls
	ls=$(mu_cniforge ls --conf-dir "$pw/net.d" --multus-dir "$multus_dir") &&
		grep -q "attachments Multus delegated (.*pods: 2)" <<<"$ls" || {
		echo "$ls"
		return 1
	}
	mu_check_traffic >/dev/null
}

mu_left() {
	local bad=()
	[ -z "$(find "$multus_dir" -type f 2>/dev/null)" ] || bad+=("Multus's cache: $(find "$multus_dir" -type f)")
	[ -z "$(ls /var/lib/cni/networks/bridge-net 2>/dev/null | grep '^[0-9]')" ] || bad+=("bridge-net leases: $(ls /var/lib/cni/networks/bridge-net | grep '^[0-9]')")
	[ -z "$(ls -A /var/lib/cni/results 2>/dev/null)" ] || bad+=("libcni cache: $(ls /var/lib/cni/results)")
	[ -z "$(ip -o link show master br-multus 2>/dev/null)" ] || bad+=("ports on br-multus: $(ip -o link show master br-multus)")
	ip link show "$hd_dev" >/dev/null 2>&1 || bad+=("$hd_dev did not come back to the node")
	[ -z "$(ip -o addr show dev "$hd_dev" 2>/dev/null | grep inet)" ] || bad+=("$hd_dev came back with an address")
	[ -z "$(ls -A /run/netns | grep -vx client)" ] || bad+=("netns files: $(ls /run/netns)")
	all_clear "${bad[@]}"
}

mu_check_delete() {
	k delete pod mpa mpb --wait --timeout 60s >/dev/null || return 1
	until_ok 100 mu_left >/dev/null || mu_left
}

# mu_leak_and_reclaim POD FILE...: a pod on bridge-net, FILE... removed
# while it lives, then the pod deleted: the runtime's DEL reaches the
# default network only, so bridge-net's lease is left; cniforge gc must
# reclaim it and Multus's cache.
mu_leak_and_reclaim() {
	local p=$1 lease
	shift
	mu_mpod "$p" '[{"name": "bridge-net"}]' || return 1
	lease=$(mu_pod_addr "$p" net1)
	rm "$@"
	# The runtime reloads its conf folder on a change.
	sleep 2
	k delete pod "$p" --wait --timeout 60s >/dev/null || return 1
	until_ok 100 bash -c '[ -z "$(ls -A /run/netns | grep -vx client)" ]'
	[ -e "/var/lib/cni/networks/bridge-net/$lease" ] || {
		echo "no leak to reclaim: bridge-net's lease $lease is gone already"
		return 1
	}
	echo "leaked: bridge-net's $lease; Multus's cache: $(find "$multus_dir" -type f | tr '\n' ' '); libcni's: $(ls /var/lib/cni/results)"
	mu_gc --apply --min-age 0s || return 1
	mu_left || return 1
	echo "gc reclaimed them"
}

# A leak as an operator makes one: Multus removed from the conf folder
# while a pod on bridge-net lives. The runtime's DEL then reaches the
# default network only; bridge-net's lease and Multus's cache are left for
# cniforge gc, which DELs what the runtime's cache and Multus's still name.
mu_check_gc_leak() {
	mu_leak_and_reclaim mpc "$pw/net.d/00-multus.conf"
}

# Multus uninstalled, binary and 00-multus.conf, while a pod on bridge-net
# lives: the runtime's DEL reaches the default network only, and its cached
# Multus attachment can no longer be DELed (no multus binary). Once the
# netns is gone, cniforge gc DELs the delegates from Multus's cache itself
# and drops the cached attachments.
mu_check_gc_uninstalled() {
	mu_check_install_multus >/dev/null || return 1
	sleep 2 # the runtime reloads its conf folder on a change
	mu_leak_and_reclaim mpd "$pw/net.d/00-multus.conf" "$cnidir/multus"
}

mu_check_cleanup() {
	local rc=0
	rm -f "$pw/net.d/00-multus.conf" "$cnidir/multus"
	rm -rf "$pw/net.d/multus.d"
	[ ! -s "$pw/hd-httpd.pid" ] || kill "$(cat "$pw/hd-httpd.pid")" 2>/dev/null
	rm -f "$pw/hd-httpd.pid"
	k delete net-attach-def macvlan-net bridge-net hostdev-net >/dev/null || rc=1
	k delete crd network-attachment-definitions.k8s.cni.cncf.io >/dev/null || rc=1
	ip link del "$mv_master" && ip link del "$hd_dev" && ip link del br-multus || rc=1
	rm -rf /var/lib/cni/networks/bridge-net "$multus_dir"
	until_ok 100 same_state >/dev/null || same_state || rc=1
	return "$rc"
}

stage_multus() {
	check "the NetworkAttachmentDefinition CRD (k8s.cni.cncf.io/v1) applied and Established" mu_check_crd
	check "Multus $multus_version installed as a cluster does: the binary in $cnidir, 00-multus.conf (clusterNetwork $net, by name) and its kubeconfig in the conf folder" mu_check_install_multus
	check "masters (veth pairs) and three NetworkAttachmentDefinitions: our macvlan (static, ips/mac capabilities), bridge (host-local), host-device (static)" mu_check_networks
	check "two pods with secondary networks through Multus become Ready" mu_check_pods
	check "each pod holds exactly what it asked for: the interface names, mac and ips requests, args.cni.ips, host-local's address (read in its netns over netlink)" mu_check_exact
	check "the network-status annotation lists each network with the pod's interface, addresses and MAC, the default one marked" mu_check_status
	check "traffic on each network: macvlan and bridge-net pod to pod, host-device both ways, eth0 pod to pod" mu_check_traffic
	check "cniforge gc --apply while the Multus pods live keeps them whole (Multus's cache, leases, links); ls lists them" mu_check_gc_live
	check "kubectl delete of the pods leaves nothing: Multus's cache, leases, links, libcni cache, netns; $hd_dev back in the node" mu_check_delete
	check "Multus removed while a pod lives: the leaked lease and Multus's cache reclaimed by cniforge gc" mu_check_gc_leak
	check "Multus uninstalled (binary and conf) while a pod lives: cniforge gc DELs its delegates from Multus's cache, and drops the cached attachments" mu_check_gc_uninstalled
	check "the node as before the stage (Multus, the CRD, masters, br-multus removed)" mu_check_cleanup
}
