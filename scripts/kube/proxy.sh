# proxy.sh — stage 3 of the Kubernetes lane (scripts/kube-lane.sh):
# kube-proxy beside portmap. For each portmap backend (the conflist
# rewritten with "backend": iptables, then nftables) and each kube-proxy
# mode (iptables, nftables): a NodePort Service (with the node's address
# as an externalIP) backed by two pods serving the lane's page is reached
# by its ClusterIP, its NodePort and its externalIP from a pod, from the
# node and from outside, while hostPort pods serving pages of their own
# run; and a hostPort never captures the Service's traffic: one pod's
# hostPort is the Service's port (8085), another's is its NodePort
# (30085). The hostPort pods are made after kube-proxy has started, and
# what portmap shares between attachments is removed first (no pod then
# running has a hostPort), so portmap's jumps and base chains come after
# kube-proxy's: the order in which CVE-2019-9946's prepended jump, or a
# base chain registered later at the same priority, would run portmap's
# DNAT first. Their pages answer on ports of their own (8087), so portmap
# is proven live, and once kube-proxy is stopped the hostPort 30085
# answers with its pod's page: the check that the Service won was not
# empty. kube-proxy --cleanup removes the mode's rules; the stage leaves
# the node as it found it.
# shellcheck shell=bash disable=SC2154 # set by kube-lane.sh

svc_port=8085
svc_nodeport=30085
hp_own=8087

# proxy_pod NAME LABEL PAGE [HOSTPORT...]: a pod of the lane's image
# (label app=LABEL) serving PAGE on port 80 ("" serves the image's own
# page, $page), each HOSTPORT mapped to 80.
proxy_pod() {
	local name=$1 label=$2 pg=$3 hp opts=()
	shift 3
	for hp in "$@"; do
		opts+=(--hostport "$hp")
	done
	if [ -n "$pg" ]; then
		pod_apply "$name" --label "app=$label" "${opts[@]}" -- \
			sh -c 'mkdir -p /tmp/w && echo "$0" >/tmp/w/index.html && exec httpd -f -p 80 -h /tmp/w' "$pg"
	else
		pod_apply "$name" --label "app=$label" "${opts[@]}" -- httpd -f -p 80 -h /www
	fi
}

pods_ready() {
	k wait --for=condition=Ready "${@/#/pod/}" --timeout 120s >/dev/null || {
		k get pods -o wide
		return 1
	}
}

# get URL WANT [NETNS]: the page at URL, from the node, from NETNS
# ("client": outside) or from pod ("pod:NAME"), must be WANT.
get() {
	local url=$1 want=$2 from=${3:-} body rc=0
	case $from in
	"") body=$(timeout 5 busybox wget -qO- "$url" 2>&1) || rc=$? ;;
	pod:*) body=$(k exec "${from#pod:}" -- timeout 5 wget -qO- "$url" 2>&1) || rc=$? ;;
	*) body=$(timeout 5 ip netns exec "$from" busybox wget -qO- "$url" 2>&1) || rc=$? ;;
	esac
	[ "$rc" = 0 ] && [ "$body" = "$want" ] || {
		echo "GET $url from ${from:-the node}: exit $rc [$body], want [$want]"
		return 1
	}
}

# The Service, its backends and a pod to fetch from, made once for the
# stage; outside gets a route to the Service range through the node, as
# a router in front of a node would have, and the node one to it (the
# node's own traffic to a ClusterIP is routed before OUTPUT's DNAT; a real
# node has a default route).
proxy_setup() {
	cat >"$pw/proxy-svc.yaml" <<-EOF
		apiVersion: v1
		kind: Service
		metadata: {name: proxy-svc, namespace: default}
		spec:
		  type: NodePort
		  selector: {app: proxy-svc}
		  externalIPs: [$hostaddr]
		  ports:
		  - {port: $svc_port, targetPort: 80, nodePort: $svc_nodeport, protocol: TCP}
	EOF
	k apply -f "$pw/proxy-svc.yaml" >/dev/null &&
		proxy_pod svc1 proxy-svc "" && proxy_pod svc2 proxy-svc "" &&
		proxy_pod pc client "pod pc" &&
		pods_ready svc1 svc2 pc &&
		ip -n client route add "$servicecidr" via "$hostaddr" &&
		ip route add "$servicecidr" via "$clientaddr" || return 1
	cp "$pw/net.d/10-lane.conflist" "$pw/proxy.conflist.orig"
	k get svc proxy-svc -o wide
}

# portmap_backend B: the lane's conflist with portmap's "backend": B (""
# restores the original), replaced in one rename so the runtime never
# reads half a file.
portmap_backend() {
	if [ -z "$1" ]; then
		cp "$pw/proxy.conflist.orig" "$pw/proxy.conflist.new"
	else
		jq --arg b "$1" '(.plugins[] | select(.type == "portmap")).backend = $b' \
			"$pw/proxy.conflist.orig" >"$pw/proxy.conflist.new" || return 1
	fi
	mv "$pw/proxy.conflist.new" "$pw/net.d/10-lane.conflist" || return 1
	# containerd reloads its conflist on a write, rename or remove in the
	# folder, not on the create a rename into it is: a file removed tells
	# it (libcni reads only .conf, .conflist and .json).
	touch "$pw/net.d/reload" && rm "$pw/net.d/reload"
	until_ok 150 runtime_has_backend "$1" || {
		echo "the runtime did not load the conflist with portmap's backend [$1]"
		return 1
	}
}

# runtime_has_backend B: the runtime's loaded conflist gives portmap
# "backend": B ("" none).
runtime_has_backend() {
	local got
	got=$(cri info | jq -r '[.. | .Source? // empty | strings | fromjson? | .plugins[]? | select(.type == "portmap") | .backend // ""] | first // "none"') || return 1
	[ "$got" = "$1" ]
}

cluster_ip() {
	k get svc proxy-svc -o jsonpath='{.spec.clusterIP}'
}

# proxy_start MODE BACKEND: kube-proxy in MODE, the Service answering on
# its ClusterIP; then (after it) the hostPort pods on portmap's BACKEND.
proxy_start() {
	local mode=$1 b=$2
	portmap_backend "$b" && start_kube_proxy "$mode" || return 1
	until_ok 150 get "http://$(cluster_ip):$svc_port/" "$page" >/dev/null || {
		get "http://$(cluster_ip):$svc_port/" "$page"
		tail -n 20 "$pw/kube-proxy.log"
		return 1
	}
	forwards_anew "$b" || return 1
	proxy_pod hpa hostport "hostport $svc_port" "$svc_port" "$hp_own" &&
		proxy_pod hpb hostport "hostport $svc_nodeport" "$svc_nodeport" "$((hp_own + 1))" &&
		pods_ready hpa hpb || return 1
	portmap_rules_in "$b"
}

# forwards_anew BACKEND: what portmap shares between attachments in
# BACKEND, made by the warm-up pod before kube-proxy ran, removed (no pod
# running now has a hostPort), so that the hostPort pods' ADD makes it
# again after kube-proxy's rules: iptables' entry jumps to
# CNI-HOSTPORT-DNAT (CVE-2019-9946 was a jump put first), nftables'
# cni_hostport tables (base chains registered after kube-proxy's).
forwards_anew() {
	local c f
	case $1 in
	iptables)
		for c in PREROUTING OUTPUT; do
			while iptables -t nat -D "$c" -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT 2>/dev/null; do :; done
		done
		;;
	nftables)
		for f in ip ip6; do
			! nft list table "$f" cni_hostport >/dev/null 2>&1 || nft delete table "$f" cni_hostport || return 1
		done
		;;
	esac
}

# portmap_rules_in BACKEND: the hostPort pods' forwards are where BACKEND
# puts them (the conflist rewrite reached the runtime).
portmap_rules_in() {
	local ids id
	ids=$(for p in hpa hpb; do sandbox "$p"; done)
	for id in $ids; do
		case $1 in
		# grep -c reads it all: -q's early exit fails the pipe (pipefail).
		iptables) iptables-save -t nat | grep -c "$id" >/dev/null ;;
		# ours comment "<hash>, net: <net>, id: <id>"; upstream's "<id>"
		nftables) nft list table ip cni_hostport 2>/dev/null | grep -c "$id" >/dev/null ;;
		esac || {
			echo "no $1 forward of sandbox $id"
			nft list tables
			nft list table ip cni_hostport
			iptables-save -t nat | grep -c "$id"
			return 1
		}
	done
}

check_services() {
	local cip rc=0
	cip=$(cluster_ip)
	get "http://$cip:$svc_port/" "$page" pod:pc || rc=1
	get "http://$hostaddr:$svc_nodeport/" "$page" pod:pc || rc=1
	get "http://$cip:$svc_port/" "$page" || rc=1
	get "http://$hostaddr:$svc_nodeport/" "$page" || rc=1
	get "http://$hostaddr:$svc_nodeport/" "$page" client || rc=1
	get "http://$cip:$svc_port/" "$page" client || rc=1
	return "$rc"
}

# The hostPort pods answer on their own ports: their forwards are live.
check_hostports_live() {
	local rc=0
	get "http://$hostaddr:$hp_own/" "hostport $svc_port" client || rc=1
	get "http://$hostaddr:$((hp_own + 1))/" "hostport $svc_nodeport" client || rc=1
	get "http://$hostaddr:$hp_own/" "hostport $svc_port" || rc=1
	get "http://$hostaddr:$((hp_own + 1))/" "hostport $svc_nodeport" pod:pc || rc=1
	return "$rc"
}

# (a) hostPort 8085 = the Service's port, on its ClusterIP and on its
# externalIP (the node's address, where the hostPort listens too).
check_svc_port_wins() {
	local cip rc=0 from
	cip=$(cluster_ip)
	for from in client "" pod:pc; do
		get "http://$hostaddr:$svc_port/" "$page" ${from:+"$from"} || rc=1
		get "http://$cip:$svc_port/" "$page" ${from:+"$from"} || rc=1
	done
	return "$rc"
}

# (b) hostPort 30085 = the Service's NodePort.
check_nodeport_wins() {
	local rc=0 from
	for from in client "" pod:pc; do
		get "http://$hostaddr:$svc_nodeport/" "$page" ${from:+"$from"} || rc=1
	done
	return "$rc"
}

# proxy_stop MODE: kube-proxy stopped and its rules cleaned up; none of
# them is left; with it gone the hostPort 30085 answers with its pod's
# page (portmap's forward was there all along); the hostPort pods
# deleted.
proxy_stop() {
	local mode=$1 rc=0 left
	stop_kube_proxy "$mode"
	kube_proxy_leftovers "$pw/proxy.chains"
	left=$( (iptables-save; ip6tables-save) | grep -E '^:KUBE-(SERVICES|NODEPORTS|SVC|SEP|EXT|POSTROUTING|MARK-MASQ|PROXY)')
	[ -z "$left" ] || {
		echo "kube-proxy's iptables chains left: $left"
		rc=1
	}
	left=$(nft list tables | grep -w kube-proxy)
	[ -z "$left" ] || {
		echo "kube-proxy's nft tables left: $left"
		rc=1
	}
	if k get pod hpb >/dev/null 2>&1; then
		until_ok 25 get "http://$hostaddr:$svc_nodeport/" "hostport $svc_nodeport" client >/dev/null ||
			get "http://$hostaddr:$svc_nodeport/" "hostport $svc_nodeport" client || rc=1
	fi
	k delete pod hpa hpb --ignore-not-found --wait --timeout 60s >/dev/null || rc=1
	return "$rc"
}



# proxy_teardown: the Service, its pods and the route gone, the conflist
# as it was; a backend the warm-up did not use leaves its (empty) shared
# tables, as upstream's does, so they go too; then the node is as before.
proxy_teardown() {
	k delete svc proxy-svc --wait --timeout 60s >/dev/null
	k delete pod svc1 svc2 pc hpa hpb --ignore-not-found --wait --timeout 60s >/dev/null
	ip -n client route del "$servicecidr" via "$hostaddr" 2>/dev/null
	ip route del "$servicecidr" via "$clientaddr" 2>/dev/null
	portmap_backend "" || return 1
	kube_proxy_leftovers "$pw/proxy.chains"
	local f
	for f in ip ip6; do
		grep -q "^table $f cni_hostport" "$pw/state.before" || nft delete table "$f" cni_hostport 2>/dev/null
	done
	until_ok 100 same_state >/dev/null || same_state
}

stage_proxy() {
	local b m f0
	nft_chains >"$pw/proxy.chains"
	check "the Service proxy-svc (NodePort $svc_nodeport, externalIP $hostaddr, port $svc_port) with two backends, and a client pod" proxy_setup
	for b in iptables nftables; do
		for m in iptables nftables; do
			f0=$failed
			check "[$m/$b] kube-proxy ($m mode) starts and serves the ClusterIP; then hostPort pods ($svc_port and $svc_nodeport) get portmap's $b forwards" proxy_start "$m" "$b"
			if [ "$failed" = "$f0" ]; then
				check "[$m/$b] ClusterIP and NodePort reached from a pod, from the node and from outside" check_services
				check "[$m/$b] the hostPort pods answer on their own ports ($hp_own, $((hp_own + 1)))" check_hostports_live
				check "[$m/$b] hostPort $svc_port = the Service's port: the Service answers (ClusterIP and externalIP; outside, node, pod)" check_svc_port_wins
				check "[$m/$b] hostPort $svc_nodeport = the NodePort: the Service answers (outside, node, pod)" check_nodeport_wins
			fi
			check "[$m/$b] kube-proxy stopped, its rules cleaned up and gone; the hostPort $svc_nodeport then reaches its pod" proxy_stop "$m"
		done
	done
	check "the Service and its pods deleted, the conflist restored: the node as before the stage" proxy_teardown
}
