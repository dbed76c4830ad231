# nodes.sh — stage 5 of the Kubernetes lane (scripts/kube-lane.sh): two
# nodes. A second kubelet with its own runtime runs in a second node
# namespace set (node B: its own network and mount namespaces inside the
# lane's pid namespace, tmpfs over /run, /var/lib, /var/log, /var/tmp and
# /opt, a fresh sysfs, its folder $work/nodeb), joined to the first node
# (node A) by a veth link, 192.168.78.1 (A) - 192.168.78.2 (B). It
# registers with the API server over that link, gets a pod CIDR from the
# controller manager (10.88.1.0/24, or another /24 of the cluster CIDR),
# which its conflist and node A's route then use. Our DaemonSet rolls out on node B too
# and node B turns Ready. A pod on each node (nodeName) serves a CGI page
# printing the peer address its httpd saw: each reaches the other and is
# seen with its own address (Kubernetes' network model: no NAT between
# pods; the conflists exclude the cluster CIDR from bridge's masquerade
# with ipMasqExcludeCIDRs), while a pod on node A still reaches the
# outside through masquerade. Deleting the pods leaves both nodes as
# before; node B is torn down at the end (kubectl delete node, its daemons
# stopped, its namespaces gone).
# shellcheck shell=bash disable=SC2154 # set by kube-lane.sh

nodeb=kube-lane-node-b
nodeb_podcidr=10.88.1.0/24 # until the controller manager says (check_nodeb_registered)
linka=192.168.78.1 # node A on the link to node B
linkb=192.168.78.2 # node B

# in_b COMMAND...: COMMAND in node B's network and mount namespaces.
in_b() {
	nsenter -t "$(cat "$work/nodeb.holder")" --net --mount -- "$@"
}

# as_b BASH-CODE: BASH-CODE run in node B's namespaces by a bash that
# holds every function of the lane (node.sh's, lane.sh's, the stages')
# and the lane's settings, with node B's own: $pw its folder, $sock its
# runtime's socket, $hostaddr its address, $node its name. Daemons it
# starts (node.sh's daemon) keep running after it.
as_b() {
	local fns vars
	fns=$(declare -f)
	vars=$(declare -p work runtime cnidir page net clustercidr k8s_version etcd_version plugins_dir 2>/dev/null)
	in_b bash -c "$fns; $vars; pw=$work/nodeb sock=$work/nodeb/containerd.sock hostaddr=$linkb node=$nodeb; cd '$PWD' || exit 1; $1"
}

# start_nodeb: node B's namespaces (held by a sleep), its mounts, the
# link, the routes, its kubeconfig (the API server over the link), its
# conflist (node A's over node B's pod CIDR), then its runtime and kubelet
# through node.sh's own start_runtime and start_kubelet.
start_nodeb() {
	local pwb=$work/nodeb
	# The cluster's CA and client certificate: node A's.
	mkdir -p "$pwb/net.d" && ln -s "$pw/pki" "$pwb/pki" || return 1
	unshare --net --mount --propagation private sleep infinity &
	echo "$!" >"$work/nodeb.holder"
	echo "$!" >"$pwb/holder.pid"
	# unshare has made the namespaces once its process runs sleep.
	until_ok 50 bash -c '[ "$(readlink /proc/$1/ns/net)" != "$(readlink /proc/self/ns/net)" ] && [ "$(readlink /proc/$1/exe)" = "$(readlink -f "$(command -v sleep)")" ]' - "$!" || {
		echo "node B's namespaces did not appear"
		return 1
	}
	# A fresh sysfs (node B's links), the cgroup hierarchies node A
	# mounted moved on top of it.
	mkdir -p "$pwb/cgroup" &&
		in_b mount --rbind /sys/fs/cgroup "$pwb/cgroup" &&
		in_b mount -t sysfs sysfs /sys &&
		in_b mount --move "$pwb/cgroup" /sys/fs/cgroup &&
		for d in /run /var/lib /var/log /opt; do
			in_b mount -t tmpfs -o mode=755 tmpfs "$d" || return 1
		done &&
		in_b mount -t tmpfs -o mode=1777 tmpfs /var/tmp &&
		in_b mkdir -p /run/netns /var/lib/cni || {
		echo "node B's mounts"
		return 1
	}
	# A comparison run installs DIR's plugins as on node A.
	[ -z "$plugins_dir" ] || in_b bash -c 'mkdir -p "$2" && cp -a "$1"/. "$2"/' - "$plugins_dir" "$cnidir" || return 1
	ip link add lb0 type veth peer name eth0 netns "/proc/$(cat "$work/nodeb.holder")/ns/net" &&
		ip addr add "$linka/24" dev lb0 && ip link set lb0 up &&
		in_b ip link set lo up &&
		in_b ip addr add "$linkb/24" dev eth0 && in_b ip link set eth0 up &&
		in_b ip route add default via "$linka" || {
		echo "the link between the nodes"
		return 1
	}
	# The API server's certificate names the service and node A's
	# outside address, not its link address: the kubeconfig asks for the
	# name the certificate holds.
	sed -e "s|server: https://127.0.0.1:6443|server: https://$linka:6443\n    tls-server-name: kubernetes|" \
		"$pw/admin.kubeconfig" >"$pwb/admin.kubeconfig" || return 1
	as_b 'start_runtime && start_kubelet'
}

check_nodeb_registered() {
	start_nodeb || return 1
	local c
	until_ok 150 bash -c '[ -n "$(kubectl --kubeconfig "$1" get node "$2" -o jsonpath="{.spec.podCIDR}")" ]' - "$pw/admin.kubeconfig" "$nodeb"
	c=$(k get node "$nodeb" -o jsonpath='{.spec.podCIDR}')
	case $c in 10.88.*.0/24) ;; *)
		echo "node B's podCIDR is [$c], not a /24 of the cluster CIDR $clustercidr"
		return 1
		;;
	esac
	[ "$c" != "$podcidr" ] || {
		echo "node B got node A's podCIDR $c"
		return 1
	}
	# As a cluster's network daemon does: node B's conflist and node A's
	# route follow the pod CIDR the controller manager gave (it is not
	# always the next one: 10.88.2.0/24 was seen after other stages).
	nodeb_podcidr=$c
	ip route add "$nodeb_podcidr" via "$linkb" dev lb0 &&
		jq --arg s "$nodeb_podcidr" '.plugins[0].ipam.ranges[0][0].subnet = $s' \
			"$pw/net.d/10-lane.conflist" >"$work/nodeb/net.d/10-lane.conflist" || return 1
	k get nodes -o wide
}

# The DaemonSet (whatever image the stages before left it at) runs on
# node B too: two pods ready, node B's /opt/cni/bin holds the image's
# cniforge and its links, node B turns Ready.
check_nodeb_rollout() {
	until_ok 300 bash -c '[ "$(kubectl --kubeconfig "$1" -n kube-system get ds cniforge -o jsonpath="{.status.desiredNumberScheduled} {.status.numberReady}")" = "2 2" ]' - "$pw/admin.kubeconfig" || {
		k -n kube-system get ds cniforge -o wide
		k -n kube-system get pods -o wide
		return 1
	}
	k -n kube-system rollout status ds/cniforge --timeout 120s || return 1
	until_ok 150 as_b 'installed_from_image >/dev/null' || {
		as_b installed_from_image
		return 1
	}
	check_nodeb_ready && k -n kube-system get pods -o wide
}

check_nodeb_ready() {
	k wait --for=condition=Ready "node/$nodeb" --timeout 120s || {
		k get node "$nodeb" -o jsonpath='{.status.conditions}'
		return 1
	}
}

# pod_on NODE NAME: a pod on NODE (nodeName) whose httpd serves, besides
# the lane's page, /cgi-bin/peer: the address the request came from, as
# httpd saw it (REMOTE_ADDR).
pod_on() {
	pod "$2" --node "$1" -- sh -c 'mkdir -p /tmp/w/cgi-bin && cp /www/index.html /tmp/w/ && { echo "#!/bin/sh"; echo "echo Content-Type: text/plain"; echo echo; echo "echo \$REMOTE_ADDR"; } >/tmp/w/cgi-bin/peer && chmod +x /tmp/w/cgi-bin/peer && exec httpd -f -p 80 -h /tmp/w'
}

# A pod up and down on node B before its snapshot, as warm_up on node A:
# from then on cni0, the shared chains and host-local's network dir exist.
check_nodeb_warm() {
	pod_on "$nodeb" warmb && k delete pod warmb --wait --timeout 60s >/dev/null || return 1
	as_b 'state' >"$work/nodeb/state.before"
	state >"$pw/state.nodes"
}

# same_state_a: node A holds what it held with node B up and before the
# pods (state.before and the link to node B).
same_state_a() {
	state >"$pw/state.nodes.now"
	diff -u "$pw/state.nodes" "$pw/state.nodes.now" || return 1
	[ -z "$(ip -o link show type veth | grep -Ev '^[0-9]*: (lh0|lb0)@')" ] &&
		[ -z "$(ls -A /var/lib/cni/results 2>/dev/null)" ] &&
		[ -z "$(ls "/var/lib/cni/networks/$net" | grep '^[0-9]')" ] || {
		echo "node A: a veth, a libcni cache entry or a host-local reservation is left"
		return 1
	}
}

# peer_seen FROM TO: FROM fetches TO's /cgi-bin/peer; TO must have seen
# FROM's own pod address.
peer_seen() {
	local from to seen rc=0
	from=$(pod_ip "$1") to=$(pod_ip "$2")
	seen=$(k exec "$1" -- timeout 5 wget -qO- "http://$to/cgi-bin/peer" 2>&1) || rc=$?
	# httpd listens on IPv6 too: it prints [::ffff:10.88.0.3].
	seen=${seen#[} seen=${seen%]} seen=${seen#::ffff:}
	[ "$rc" = 0 ] && [ "$seen" = "$from" ] || {
		echo "pod $1 ($from) -> pod $2 ($to): exit $rc, $2 saw [$seen]"
		return 1
	}
	echo "pod $1 ($from) -> pod $2 ($to): seen as $seen"
}

check_cross_pods() {
	pod_on "$node" pa && pod_on "$nodeb" pb || return 1
	local ipa ipb
	ipa=$(pod_ip pa) ipb=$(pod_ip pb)
	case $ipa in 10.88.0.*) ;; *) echo "pod pa on node A has [$ipa], not in 10.88.0.0/24" && return 1 ;; esac
	case $ipb in "${nodeb_podcidr%.0/24}".*) ;; *) echo "pod pb on node B has [$ipb], not in $nodeb_podcidr" && return 1 ;; esac
	echo "pa $ipa (node A), pb $ipb (node B)"
}

check_a_to_b() { peer_seen pa pb; }
check_b_to_a() { peer_seen pb pa; }

# Outside has no route to the pods: the page comes back only masqueraded.
check_a_outside() {
	! ip -n client route get "$(pod_ip pa)" >/dev/null 2>&1 || {
		echo "outside has a route to pa's address"
		return 1
	}
	in_pod pa "http://$clientaddr/"
}

# same_state_b: node B holds what it held after its warm-up pod.
same_state_b() {
	as_b 'state' >"$work/nodeb/state.now"
	diff -u "$work/nodeb/state.before" "$work/nodeb/state.now" || return 1
	as_b '[ -z "$(ip -o link show type veth | grep -v "^[0-9]*: eth0@")" ] && [ -z "$(ls -A /var/lib/cni/results 2>/dev/null)" ]' || {
		echo "node B: a veth or a libcni cache entry is left"
		return 1
	}
}

check_cross_delete() {
	k delete pod pa pb --wait --timeout 60s >/dev/null || return 1
	until_ok 100 same_state_a >/dev/null || {
		echo "node A:"
		same_state_a
		return 1
	}
	until_ok 100 same_state_b >/dev/null || {
		echo "node B:"
		same_state_b
		return 1
	}
}

# stop_nodeb: the kubelet stopped first (it would restart what goes), the
# node deleted and its pods with it, the runtime's pods removed through
# the runtime (their cgroups go), the runtime stopped, then every process
# left in node B's network namespace (shims, the holder) ended, so the
# namespaces go and with them the link.
stop_nodeb() {
	local pwb=$work/nodeb p netb
	[ ! -s "$pwb/kubelet.pid" ] || kill "$(cat "$pwb/kubelet.pid")" 2>/dev/null
	k delete node "$nodeb" --wait --timeout 60s >/dev/null 2>&1
	k delete pods -A --field-selector "spec.nodeName=$nodeb" --force --grace-period=0 >/dev/null 2>&1
	if [ -s "$pwb/containerd.pid" ]; then
		as_b 'cri rmp -fa' >/dev/null 2>&1
		kill "$(cat "$pwb/containerd.pid")" 2>/dev/null
	fi
	netb=$(readlink "/proc/$(cat "$work/nodeb.holder" 2>/dev/null)/ns/net" 2>/dev/null)
	if [ -n "$netb" ]; then
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/ns/net" 2>/dev/null)" != "$netb" ] || kill -9 "${p#/proc/}" 2>/dev/null
		done
	fi
	rm -f "$pwb"/*.pid
}

check_nodeb_gone() {
	stop_nodeb
	! k get node "$nodeb" >/dev/null 2>&1 || {
		echo "node $nodeb is still registered"
		return 1
	}
	[ -z "$(k get pods -A --field-selector "spec.nodeName=$nodeb" -o name)" ] || {
		echo "pods of $nodeb left: $(k get pods -A --field-selector "spec.nodeName=$nodeb" -o name)"
		return 1
	}
	until_ok 100 bash -c '! ip link show lb0 >/dev/null 2>&1' || {
		echo "the link to node B is still there: something holds its namespace"
		return 1
	}
	until_ok 100 same_state >/dev/null || same_state
}

stage_nodes() {
	check "node B (own net and mount namespaces, containerd, kubelet) joins over the link $linka-$linkb; the controller manager gives it a pod CIDR of $clustercidr, which its conflist and node A's route then use" check_nodeb_registered || true
	if k get node "$nodeb" >/dev/null 2>&1; then
		if [ -n "$plugins_dir" ]; then
			skip "our DaemonSet on node B (a comparison run installs no DaemonSet)"
			check "node B Ready with the plugins of $plugins_dir" check_nodeb_ready
		else
			check "our DaemonSet rolls out on node B too: its pod ready, node B's /opt/cni/bin holds the image's cniforge, node B Ready" check_nodeb_rollout
		fi
	fi
	# Pods on node B need it Ready: without that each would only wait out
	# its timeout. The teardown runs whatever happened.
	if [ "$(k get node "$nodeb" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; then
		check "a warm-up pod on node B (nodeName), deleted; node B's state taken" check_nodeb_warm
		check "a pod on each node (nodeName), pa in 10.88.0.0/24, pb in $nodeb_podcidr" check_cross_pods
		check "pod on node A -> pod on node B: pb sees pa's own address (no NAT between pods: ipMasqExcludeCIDRs)" check_a_to_b
		check "pod on node B -> pod on node A: pa sees pb's own address" check_b_to_a
		check "pod on node A -> outside ($clientaddr, no route to the pods): still masqueraded" check_a_outside
		check "kubectl delete of the pods leaves node A and node B as before" check_cross_delete
	fi
	check "node B torn down: kubectl delete node, its pods gone, its daemons stopped, its namespaces and the link gone, node A as before" check_nodeb_gone
}
