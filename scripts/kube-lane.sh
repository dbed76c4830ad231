#!/usr/bin/env bash
# kube-lane.sh — a real single-node Kubernetes cluster against our plugins:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a kubelet
# and containerd 2.x (scripts/cri-deps.sh), Kubernetes v1.34.4 and etcd
# built by scripts/kube-deps.sh. test_linux.sh runs it.
#
#   1. The install: the node starts with no plugin in its /opt/cni/bin and
#      is NotReady (the runtime's network is not ready); our DaemonSet
#      (deploy/cniforge-daemonset.yaml, its image the node image loaded
#      into containerd) is applied with kubectl, the kubelet runs it, it
#      installs the plugins and the node turns Ready. A second rollout (a
#      new image tag) replaces the binaries while pods run.
#   2. Pods through the kubelet: a hostPort pod reached on the node's
#      address, bandwidth annotations as tbf on the host veth and the ifb,
#      pod to pod, pod to outside (masquerade: "outside" has no route back
#      to the pods), and deleting the pods leaves nothing (host-local
#      leases, netfilter rules, qdiscs, ifbs, netns files).
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
# Each check prints "ok - ..." or "not ok - ..."; the lane closes with
# "kube-lane: N passed, M failed" (test_linux.sh adds it to its total) and
# exits non-zero on any failure.
#
#   scripts/kube-lane.sh            run as root after ./build_linux.sh
#   CNIFORGE_KUBE_KEEP=1            keep the lane's folder (logs) afterwards
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

# --- the inner half: the stand-in node ---------------------------------------

k() {
	kubectl --kubeconfig "$pw/admin.kubeconfig" "$@"
}

# cri: crictl, to read what the kubelet made (never to make it).
cri() {
	crictl --config "$pw/crictl.yaml" "$@"
}

check() {
	run_check "$1" "$pw/check.log" "${@:2}"
}

# daemon NAME COMMAND...: COMMAND in the background, its output in
# $pw/NAME.log.
daemon() {
	local name=$1
	shift
	"$@" >>"$pw/$name.log" 2>&1 &
	echo "$!" >"$pw/$name.pid"
}

# alive NAME...: each daemon still runs; the last lines of its log if not.
alive() {
	local n rc=0
	for n in "$@"; do
		kill -0 "$(cat "$pw/$n.pid")" 2>/dev/null || {
			echo "$n exited; its log:"
			tail -n 20 "$pw/$n.log"
			rc=1
		}
	done
	return "$rc"
}

# certs: a CA, the API server's serving certificate, an admin client
# certificate (system:masters) every component uses, the service-account
# signing key.
certs() {
	local d=$pw/pki
	mkdir -p "$d" && cd "$d" || return 1
	local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
	openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 2 -subj /CN=kube-lane-ca &&
		openssl req "${ec[@]}" -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver &&
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 2 \
			-extfile <(printf 'subjectAltName=IP:127.0.0.1,IP:%s,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' "$hostaddr") &&
		openssl req "${ec[@]}" -keyout admin.key -out admin.csr -subj /O=system:masters/CN=kube-lane-admin &&
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 2 \
			-extfile <(printf 'extendedKeyUsage=clientAuth\n') &&
		openssl ecparam -name prime256v1 -genkey -noout -out sa.key &&
		openssl ec -in sa.key -pubout -out sa.pub
	local rc=$?
	cd - >/dev/null || return 1
	[ "$rc" = 0 ] || return 1
	cat >"$pw/admin.kubeconfig" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: lane
		  cluster:
		    server: https://127.0.0.1:6443
		    certificate-authority: $d/ca.crt
		users:
		- name: admin
		  user:
		    client-certificate: $d/admin.crt
		    client-key: $d/admin.key
		contexts:
		- name: lane
		  context: {cluster: lane, user: admin}
		current-context: lane
	EOF
}

start_control_plane() {
	local d=$pw/pki
	daemon etcd etcd --name lane --data-dir "$pw/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster lane=http://127.0.0.1:2380 --listen-metrics-urls= --log-level warn
	daemon apiserver kube-apiserver --etcd-servers http://127.0.0.1:2379 \
		--advertise-address "$hostaddr" --bind-address 0.0.0.0 --secure-port 6443 \
		--service-cluster-ip-range "$servicecidr" \
		--tls-cert-file "$d/apiserver.crt" --tls-private-key-file "$d/apiserver.key" \
		--client-ca-file "$d/ca.crt" --kubelet-preferred-address-types InternalIP \
		--kubelet-client-certificate "$d/admin.crt" --kubelet-client-key "$d/admin.key" \
		--service-account-key-file "$d/sa.pub" --service-account-signing-key-file "$d/sa.key" \
		--service-account-issuer https://kubernetes.default.svc \
		--authorization-mode AlwaysAllow --enable-priority-and-fairness=false \
		--profiling=false --v=1
	until_ok 600 k get --raw /readyz >/dev/null 2>&1 || {
		alive etcd apiserver
		tail -n 20 "$pw/apiserver.log"
		return 1
	}
	daemon controller-manager kube-controller-manager --kubeconfig "$pw/admin.kubeconfig" \
		--authentication-kubeconfig "$pw/admin.kubeconfig" --authorization-kubeconfig "$pw/admin.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false \
		--service-account-private-key-file "$d/sa.key" --root-ca-file "$d/ca.crt" \
		--allocate-node-cidrs --cluster-cidr "$clustercidr" --node-cidr-mask-size 24 \
		--service-cluster-ip-range "$servicecidr" --profiling=false --v=1
	daemon scheduler kube-scheduler --kubeconfig "$pw/admin.kubeconfig" \
		--authentication-kubeconfig "$pw/admin.kubeconfig" --authorization-kubeconfig "$pw/admin.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1
	# The service account the DaemonSet's pod mounts a token of.
	until_ok 300 k -n kube-system get serviceaccount default >/dev/null 2>&1 || {
		alive controller-manager
		return 1
	}
	alive etcd apiserver controller-manager scheduler
}

# containerd 2.x, its config as the CRI lane's: everything in the lane's
# folder, plugins from the node's /opt/cni/bin, the conflist from
# $pw/net.d.
start_containerd() {
	local d=$PWD/.cache/cri/containerd-v2.4.2
	mkdir -p "$pw/bin" && ln -sf "$d/containerd-shim-runc-v2" "$pw/bin/"
	cat >"$pw/crictl.yaml" <<-EOF
		runtime-endpoint: unix://$pw/containerd.sock
		image-endpoint: unix://$pw/containerd.sock
		timeout: 30
	EOF
	containerd2_toml "$cnidir" >"$pw/containerd.toml"
	PATH=$pw/bin:$PATH daemon containerd "$d/containerd" -c "$pw/containerd.toml"
	until_ok 150 cri info >/dev/null 2>&1 || {
		alive containerd
		return 1
	}
	local a
	for a in images node-lane1 node-lane2; do
		"$d/ctr" --address "$pw/containerd.sock" -n k8s.io images import --snapshotter overlayfs "$work/$a.tar" >/dev/null || return 1
	done
}

start_kubelet() {
	cat >"$pw/kubelet.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		authentication:
		  anonymous: {enabled: true}
		  webhook: {enabled: false}
		  x509: {clientCAFile: $pw/pki/ca.crt}
		authorization: {mode: AlwaysAllow}
		address: $hostaddr
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		containerRuntimeEndpoint: unix://$pw/containerd.sock
		cgroupDriver: cgroupfs
		cgroupsPerQOS: false
		enforceNodeAllocatable: []
		failSwapOn: false
		localStorageCapacityIsolation: false
		resolvConf: $pw/resolv.conf
		podLogsDir: /var/log/pods
		# No registry: never collect the imported images.
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
		oomScoreAdj: 0
		maxPods: 30
		nodeStatusUpdateFrequency: 2s
		syncFrequency: 10s
		fileCheckFrequency: 10s
		serializeImagePulls: false
		rotateCertificates: false
		serverTLSBootstrap: false
	EOF
	echo "nameserver $hostaddr" >"$pw/resolv.conf"
	daemon kubelet kubelet --config "$pw/kubelet.yaml" --kubeconfig "$pw/admin.kubeconfig" \
		--hostname-override "$node" --node-ip "$hostaddr" --v=1
	until_ok 300 k get node "$node" >/dev/null 2>&1 || {
		alive kubelet containerd
		tail -n 30 "$pw/kubelet.log"
		return 1
	}
}

# node_ready: the node's Ready condition, True or False.
node_ready() {
	k get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
}

# 1. The node is up, NotReady because the network is not ready, and its
# plugin folder holds nothing.
check_not_ready() {
	local msg
	# The kubelet reports the runtime's state after its first sync.
	until_ok 150 bash -c '[ -n "$(kubectl --kubeconfig "$1" get node "$2" -o jsonpath="{.status.conditions[?(@.type==\"Ready\")].message}")" ]' - "$pw/admin.kubeconfig" "$node" || true
	[ "$(node_ready)" = False ] || {
		echo "the node is Ready before any plugin is installed:"
		k get node "$node" -o yaml
		return 1
	}
	msg=$(k get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
	grep -q "network not ready: NetworkReady=false" <<<"$msg" || {
		echo "the node is NotReady, but not for its network: [$msg]"
		return 1
	}
	echo "Ready=False: $msg"
	[ -z "$(ls -A "$cnidir" 2>/dev/null)" ] || {
		echo "$cnidir is not empty: $(ls "$cnidir")"
		return 1
	}
}

check_podcidr() {
	local c
	c=$(k get node "$node" -o jsonpath='{.spec.podCIDR}')
	[ "$c" = "$podcidr" ] || {
		echo "the node's podCIDR is [$c], the conflist's subnet $podcidr"
		return 1
	}
}

# The DaemonSet from deploy/, its image the node image imported into
# containerd; applied with kubectl.
apply_daemonset() {
	sed "s|image: cniforge:VERSION|image: localhost/cniforge-node:lane1|" deploy/cniforge-daemonset.yaml >"$pw/ds.yaml"
	grep -q 'image: localhost/cniforge-node:lane1' "$pw/ds.yaml" || {
		echo "deploy/cniforge-daemonset.yaml has no 'image: cniforge:VERSION' to point at the node image"
		return 1
	}
	k apply -f "$pw/ds.yaml"
}

check_ds_ready() {
	k -n kube-system rollout status ds/cniforge --timeout 180s || {
		k -n kube-system get pods -o wide
		k -n kube-system describe pods -l app.kubernetes.io/name=cniforge | tail -n 30
		return 1
	}
	until_ok 150 installed_from_image >/dev/null || {
		installed_from_image
		return 1
	}
	k -n kube-system logs ds/cniforge | grep -q "installed into /host/opt/cni/bin" || {
		echo "the DaemonSet's pod did not say it installed; its log:"
		k -n kube-system logs ds/cniforge
		return 1
	}
}

check_node_ready() {
	k wait --for=condition=Ready "node/$node" --timeout 120s || {
		k get node "$node" -o jsonpath='{.status.conditions}'
		return 1
	}
}

check_plugins() {
	plugins_ours "$pw/net.d/10-lane.conflist"
}

# --- pods ---------------------------------------------------------------------

# pod NAME [HOSTPORT [BANDWIDTH]] -- COMMAND...: a pod of the lane's image
# applied with kubectl.
pod() {
	local name=$1 port=$2 bw=$3
	shift 4
	local cmd
	cmd=$(printf '%s\n' "$@" | jq -R . | jq -sc .)
	{
		cat <<-EOF
			apiVersion: v1
			kind: Pod
			metadata:
			  name: $name
			  namespace: default
		EOF
		[ -z "$bw" ] || cat <<-EOF
			  annotations:
			    kubernetes.io/ingress-bandwidth: $bw
			    kubernetes.io/egress-bandwidth: $bw
		EOF
		cat <<-EOF
			spec:
			  terminationGracePeriodSeconds: 1
			  automountServiceAccountToken: false
			  containers:
			  - name: main
			    image: localhost/cniforge-lane:1
			    imagePullPolicy: Never
			    command: $cmd
		EOF
		[ -z "$port" ] || cat <<-EOF
			    ports:
			    - containerPort: 80
			      hostPort: $port
		EOF
	} >"$pw/$name.yaml"
	k apply -f "$pw/$name.yaml" >/dev/null && k wait --for=condition=Ready "pod/$name" --timeout 120s >/dev/null || {
		k describe pod "$name" | tail -n 20
		return 1
	}
}

pod_ip() {
	k get pod "$1" -o jsonpath='{.status.podIP}'
}

# sandbox POD: the pod's sandbox ID, read from containerd (the kubelet
# made it).
sandbox() {
	cri pods -q --name "^$1\$" --namespace default --state ready | head -n 1
}

# host_veth POD: the node's end of the pod's eth0.
host_veth() {
	local nsp idx
	nsp=$(cri inspectp -o json "$(sandbox "$1")" |
		jq -r '.info.runtimeSpec.linux.namespaces[] | select(.type == "network") | .path') || return 1
	idx=$(nsenter --net="$nsp" ip -j link show eth0 | jq -r '.[0].link_index') || return 1
	ip -j link show | jq -r --argjson i "$idx" '.[] | select(.ifindex == $i) | .ifname'
}

# in_pod POD URL: the page at URL, fetched from inside POD (kubectl exec).
in_pod() {
	local body rc=0
	body=$(k exec "$1" -- timeout 5 wget -qO- "$2" 2>&1) || rc=$?
	[ "$rc" = 0 ] && [ "$body" = "$page" ] || {
		echo "GET $2 from pod $1: exit $rc [$body]"
		return 1
	}
}

# A pod up and down before state.before: from then on cni0, the shared
# chains and host-local's network dir exist, so the comparison after the
# pods sees only what belongs to pods.
warm_up() {
	pod warm 8089 "" -- sleep 3600 && k delete pod warm --wait --timeout 60s >/dev/null
}

check_web() {
	pod web 8083 10M -- httpd -f -p 80 -h /www || return 1
	until_ok 25 fetch "http://$hostaddr:8083/" client
}

check_web_from_node() {
	fetch "http://$hostaddr:8083/"
}

check_bandwidth() {
	local veth ifb q id
	veth=$(host_veth web) || return 1
	[ -n "$veth" ] || {
		echo "no host veth found for pod web"
		return 1
	}
	q=$(tc qdisc show dev "$veth")
	grep -q "tbf .* rate 10Mbit" <<<"$q" || {
		echo "no tbf at 10Mbit on $veth: $q"
		return 1
	}
	id=$(sandbox web)
	ifb=$(jq -r '.result.interfaces[].name | select(startswith("bwp"))' "/var/lib/cni/results/$net-$id-eth0") || return 1
	q=$(tc qdisc show dev "$ifb")
	grep -q "tbf .* rate 10Mbit" <<<"$q" || {
		echo "no tbf at 10Mbit on the pod's ifb [$ifb]: $q"
		return 1
	}
	echo "$veth: tbf 10Mbit; ifb $ifb: tbf 10Mbit"
}

check_pod2pod() {
	local ip
	pod other "" "" -- sleep 3600 || return 1
	ip=$(pod_ip web)
	in_pod other "http://$ip/"
}

# "Outside" (the client netns) serves the page on its address and has no
# route to the pod network: the reply reaches the pod only if the node
# masqueraded its request.
check_outside() {
	local ip
	ip=$(pod_ip other)
	! ip -n client route get "$ip" >/dev/null 2>&1 || {
		echo "outside has a route to the pod address $ip: $(ip -n client route get "$ip")"
		return 1
	}
	in_pod other "http://$clientaddr/"
}

check_delete() {
	k delete pod web other --wait --timeout 60s >/dev/null || return 1
	until_ok 100 same_state >/dev/null || same_state
}

# same_state: the node holds what it held before the first pod.
same_state() {
	local bad=()
	state >"$pw/state.now"
	diff -u "$pw/state.before" "$pw/state.now" || bad+=("the node differs from before the first pod")
	[ -z "$(ip -o link show type veth | grep -v '^[0-9]*: lh0@')" ] || bad+=("veth left")
	[ -z "$(ip -o link show type ifb)" ] || bad+=("ifb left")
	[ -z "$(ls -A /var/lib/cni/results 2>/dev/null)" ] || bad+=("libcni cache entries left: $(ls /var/lib/cni/results)")
	[ -z "$(ls "/var/lib/cni/networks/$net" | grep '^[0-9]')" ] || bad+=("host-local reservations left: $(ls "/var/lib/cni/networks/$net" | grep '^[0-9]')")
	[ ${#bad[@]} = 0 ] || {
		printf '%s\n' "${bad[@]}"
		return 1
	}
}

# The second rollout: a new image tag; the kubelet replaces the pod, the
# new one replaces the binaries while a pod keeps running; a pod started
# after gets its network.
check_rollout() {
	local ino1 ino2 loop rc=0
	pod keep "" "" -- httpd -f -p 80 -h /www || return 1
	ino1=$(stat -c %i "$cnidir/cniforge")
	# A runtime exec'ing a plugin all through the rollout never fails.
	rm -f "$pw/rollout.stop" "$pw/rollout.execfail"
	(
		while [ ! -e "$pw/rollout.stop" ]; do
			CNI_COMMAND=VERSION "$cnidir/loopback" <<<'{"cniVersion": "1.1.0"}' >/dev/null 2>&1 ||
				echo "exec of $cnidir/loopback failed" >>"$pw/rollout.execfail"
		done
	) &
	loop=$!
	k -n kube-system set image ds/cniforge cniforge=localhost/cniforge-node:lane2 >/dev/null &&
		k -n kube-system rollout status ds/cniforge --timeout 180s >/dev/null &&
		until_ok 150 k -n kube-system logs ds/cniforge 2>/dev/null >"$pw/ds2.log" &&
		until_ok 150 grep -q "installed into /host/opt/cni/bin" "$pw/ds2.log" || rc=1
	touch "$pw/rollout.stop"
	wait "$loop"
	[ "$rc" = 0 ] || {
		echo "the rollout to lane2 did not finish with an install:"
		k -n kube-system get pods -o wide
		cat "$pw/ds2.log"
		return 1
	}
	[ "$(k -n kube-system get pods -l app.kubernetes.io/name=cniforge -o jsonpath='{.items[*].spec.containers[0].image}')" = localhost/cniforge-node:lane2 ] || {
		k -n kube-system get pods -o wide
		return 1
	}
	ino2=$(stat -c %i "$cnidir/cniforge")
	[ "$ino1" != "$ino2" ] || {
		echo "the new image's pod did not replace $cnidir/cniforge (inode $ino1)"
		return 1
	}
	installed_from_image || return 1
	[ ! -s "$pw/rollout.execfail" ] || {
		echo "a plugin exec failed while the rollout replaced the files:"
		sort "$pw/rollout.execfail" | uniq -c
		return 1
	}
	pod after 8084 "" -- httpd -f -p 80 -h /www || return 1
	until_ok 25 fetch "http://$hostaddr:8084/" client &&
		fetch "http://$(pod_ip keep)/" || return 1
	echo "cniforge replaced (inode $ino1 -> $ino2)"
	k delete pod keep after --wait --timeout 60s >/dev/null &&
		until_ok 100 same_state >/dev/null || same_state
}

finish() {
	local p
	for p in kubelet scheduler controller-manager apiserver containerd etcd; do
		[ ! -s "$pw/$p.pid" ] || kill "$(cat "$pw/$p.pid")" 2>/dev/null
	done
	echo "$passed $failed" >"$pw/counts"
	exit 0
}

# private_cgroups: a fresh sysfs (the new netns's links) and the cgroup
# hierarchies mounted again: in the lane's cgroup namespace their root is
# the lane's own cgroup.
private_cgroups() {
	local mounts t mp o
	mounts=$(awk '$3 ~ /^cgroup2?$/ && $2 ~ "^/sys/fs/cgroup" {print $3, $2, $4}' /proc/self/mounts)
	mount -t sysfs sysfs /sys || return 1
	if [ "$(awk '$2 == "/sys/fs/cgroup" {print $3}' <<<"$mounts" | tr -d '\n')" != cgroup2 ]; then
		mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup || return 1
	fi
	while read -r t mp o; do
		mkdir -p "$mp" && mount -t "$t" -o "$o" cgroup "$mp" || return 1
	done <<<"$mounts"
}

inner() {
	work=$1
	pw=$work/node
	cnidir=/opt/cni/bin
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
	jq -n --arg net "$net" --arg subnet "$podcidr" '
	{cniVersion: "1.1.0", name: $net, plugins: [
	  {type: "bridge", bridge: "cni0", isGateway: true, ipMasq: true, hairpinMode: true,
	   ipam: {type: "host-local", ranges: [[{subnet: $subnet}]], routes: [{dst: "0.0.0.0/0"}]}},
	  {type: "portmap", capabilities: {portMappings: true}, snat: true},
	  {type: "bandwidth", capabilities: {bandwidth: true}}]}' >"$pw/net.d/10-lane.conflist"
	# "Outside": a page on the client netns's address.
	mkdir -p "$pw/outside" && echo "$page" >"$pw/outside/index.html"
	ip netns exec client busybox httpd -p "$clientaddr:80" -h "$pw/outside"

	local t0=$SECONDS
	check "certificates and keys (openssl)" certs
	check "etcd $etcd_version, kube-apiserver, kube-controller-manager, kube-scheduler $k8s_version start and answer" start_control_plane
	check "containerd 2.4.2 starts, the images (pause, workload, node) imported with ctr" start_containerd
	check "the kubelet starts and registers node $node" start_kubelet
	[ "$failed" = 0 ] || finish
	echo "kube-lane: time: the cluster up in $((SECONDS - t0)) s"
	check "the node is NotReady (network not ready) with $cnidir empty" check_not_ready
	check "the controller manager gave the node the conflist's pod CIDR $podcidr" check_podcidr
	check "kubectl apply deploy/cniforge-daemonset.yaml (image: the imported node image)" apply_daemonset
	check "the kubelet runs the DaemonSet's pod, it installs the image's cniforge and a link per plugin into $cnidir" check_ds_ready
	check "the node turns Ready" check_node_ready
	# Pods need a Ready node: without one each would only wait out its timeout.
	[ "$(node_ready)" = True ] || finish
	check "every plugin of the node's conflist is cniforge's and answers VERSION 1.1.0" check_plugins
	echo "kube-lane: time: the node Ready $((SECONDS - t0)) s after the start"
	warm_up || fail "a warm-up pod (apply, delete)"
	state >"$pw/state.before"
	check "a hostPort pod (8083, 10M bandwidth annotations) runs; its page reached on the node's address $hostaddr:8083 from outside" check_web
	check "the hostPort reached from the node itself" check_web_from_node
	check "bandwidth annotations: tbf at 10Mbit on the pod's host veth and on its ifb" check_bandwidth
	check "pod to pod (kubectl exec, wget of the web pod's address)" check_pod2pod
	check "pod to outside ($clientaddr, which has no route to the pods): masqueraded as $hostaddr" check_outside
	check "kubectl delete of the pods leaves nothing (leases, rules, qdiscs, ifbs, veths, netns files, libcni cache)" check_delete
	check "a second rollout (node image lane2) replaces the binaries while a pod runs and a plugin is exec'd; the running pod and one started after are reached; deleting them leaves nothing" check_rollout
	echo "kube-lane: time: all checks $((SECONDS - t0)) s after the start"
}

if [ "${1:-}" = --inner ]; then
	inner "$2"
	exit 0
fi

# --- the outer half: the real host --------------------------------------------

need_root
missing_tools runc catatonit busybox jq unshare nsenter tc iptables-save ip6tables-save nft openssl go
[ ${#missing[@]} = 0 ] || bail "missing ${missing[*]}"
scripts/cri-deps.sh || bail "scripts/cri-deps.sh could not build crictl and containerd 2.x"
scripts/kube-deps.sh || bail "scripts/kube-deps.sh could not build Kubernetes $k8s_version and etcd $etcd_version"

. scripts/host-snapshot.sh
work=$(mktemp -d /tmp/cniforge-kube.XXXXXX)
if [ "${CNIFORGE_KUBE_KEEP:-}" = 1 ]; then
	echo "kube-lane: keeping $work"
else
	trap 'rm -rf "$work"' EXIT
fi
watched=(/var/lib/containerd /run/containerd /run/netns /etc/cni /opt/cni /var/lib/kubelet /var/log/pods /var/log/containers /etc/kubernetes)
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
		bash "$self" --inner "$work"
)
rc=$?
if read -r p f <"$work/node/counts" 2>/dev/null; then
	passed=$((passed + p)) failed=$((failed + f))
else
	fail "the node ended early (exit $rc)"
fi
if [ "$failed" != 0 ]; then
	for l in kubelet containerd apiserver controller-manager scheduler etcd; do
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
