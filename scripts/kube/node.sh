# node.sh — the Kubernetes lane's stand-in node: its daemons (etcd, the
# control plane, the runtime, the kubelet) and the helpers every stage
# uses to make pods and read what the kubelet made. Sourced by
# scripts/kube-lane.sh inside the node's namespaces; $pw is the node's
# folder, $runtime the runtime it runs (containerd2, containerd1).
# shellcheck shell=bash disable=SC2154 # set by kube-lane.sh

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

# start_runtime: the node's container runtime ($runtime), its config as the
# CRI lane's: everything in the node's folder, plugins from the node's
# /opt/cni/bin, the conflist from $pw/net.d; the lane's images (pause,
# workload, node lane1 and lane2) imported.
start_runtime() {
	cat >"$pw/crictl.yaml" <<-EOF
		runtime-endpoint: unix://$sock
		image-endpoint: unix://$sock
		timeout: 30
	EOF
	local d ctr_bin
	case $runtime in
	containerd2)
		d=$PWD/.cache/cri/containerd-v2.4.2
		ctr_bin=$d/ctr
		# containerd 2.x looks for its shim on PATH before beside itself.
		mkdir -p "$pw/bin" && ln -sf "$d/containerd-shim-runc-v2" "$pw/bin/"
		containerd2_toml "$cnidir" >"$pw/containerd.toml"
		PATH=$pw/bin:$PATH daemon containerd "$d/containerd" -c "$pw/containerd.toml"
		;;
	containerd1)
		ctr_bin=$(command -v ctr)
		containerd16_toml "$cnidir" >"$pw/containerd.toml"
		daemon containerd containerd -c "$pw/containerd.toml"
		;;
	crio)
		# CRI-O reads its images from its containers-storage: they go in
		# before it starts, by its own storage library (copyimg).
		crio_images && runc_crio && crio_conf >"$pw/crio.conf" || return 1
		start_crio
		return
		;;
	*)
		echo "no runtime $runtime"
		return 1
		;;
	esac
	until_ok 150 cri info >/dev/null 2>&1 || {
		alive containerd
		return 1
	}
	local a
	for a in images node-lane1 node-lane2; do
		"$ctr_bin" --address "$sock" -n k8s.io images import --snapshotter overlayfs "$work/$a.tar" >/dev/null || return 1
	done
}

# The CRI-O runtime (--runtime crio): CRI-O v1.34.0 from
# scripts/crio-deps.sh, Debian's conmon and runc.
crio_bin=$PWD/.cache/crio/v1.34.0

# crio_conf: CRI-O's whole config, everything in $pw/crio (storage, its
# state, exit files, attach sockets, hooks, CDI), its socket $sock,
# cgroupfs (conmon in the pod's cgroup), runc, the lane's pinned pause
# image and no registry; plugins from $cnidir, the conflist from $pw/net.d.
# The netns files stay in /run/netns (namespaces_dir /run), where the
# lane's state looks for them.
crio_conf() {
	local c=$pw/crio
	cat <<-EOF
		[crio]
		root = "$c/root"
		runroot = "$c/runroot"
		storage_driver = "overlay"
		log_dir = "$c/logs"
		version_file = "$c/version"
		version_file_persist = "$c/version-persist"
		clean_shutdown_file = "$c/clean.shutdown"
		[crio.api]
		listen = "$sock"
		stream_address = "127.0.0.1"
		stream_port = "0"
		[crio.runtime]
		default_runtime = "runc"
		cgroup_manager = "cgroupfs"
		namespaces_dir = "/run"
		pinns_path = "$crio_bin/pinns"
		container_exits_dir = "$c/exits"
		container_attach_socket_dir = "$c/attach"
		hooks_dir = ["$c/hooks.d"]
		cdi_spec_dirs = ["$c/cdi"]
		log_to_journald = false
		selinux = false
		apparmor_profile = ""
		[crio.runtime.runtimes.runc]
		runtime_path = "$pw/bin/runc-crio"
		runtime_root = "$pw/runc"
		runtime_type = "oci"
		monitor_path = "$(command -v conmon)"
		monitor_cgroup = "pod"
		[crio.image]
		pause_image = "localhost/cniforge-pause:1"
		pinned_images = ["localhost/cniforge-pause:1"]
		signature_policy = "$pw/policy.json"
		signature_policy_dir = "$c/policies"
		global_auth_file = ""
		[crio.network]
		network_dir = "$pw/net.d"
		plugin_dirs = ["$cnidir"]
		[crio.metrics]
		enable_metrics = false
		[crio.tracing]
		enable_tracing = false
		[crio.nri]
		enable_nri = false
	EOF
}

# crio_images: the lane's images (pause, workload, node lane1 and lane2)
# copied from their docker-archives into CRI-O's containers-storage.
crio_images() {
	echo '{"default": [{"type": "insecureAcceptAnything"}]}' >"$pw/policy.json"
	local r
	for r in images:localhost/cniforge-pause:1 images:localhost/cniforge-lane:1 \
		node-lane1:localhost/cniforge-node:lane1 node-lane2:localhost/cniforge-node:lane2; do
		"$crio_bin/copyimg" --root "$pw/crio/root" --runroot "$pw/crio/runroot" --storage-driver overlay \
			--signature-policy "$pw/policy.json" --image-name "${r#*:}" \
			--import-from "docker-archive:$work/${r%%:*}.tar:${r#*:}" || return 1
	done
}

# runc_crio: the runc CRI-O runs, runc behind a wrapper doing what
# containerd's restrict_oom_score_adj does and CRI-O cannot: a container's
# oom_score_adj below the runtime's own is raised to it. The lane has no
# CAP_SYS_RESOURCE (nor does a node in a container), so lowering it fails
# runc's create ("failed to update /proc/self/oom_score_adj: Permission
# denied"): CRI-O gives pod infra containers -998 and the kubelet gives
# node-critical pods -997. And where the host mounts no hugetlb cgroup
# (cgroup v1 here) the hugepage limits the kubelet asks for are dropped:
# CRI-O checks only the kernel's support, and runc then fails ("cannot set
# hugetlb limit").
runc_crio() {
	local hugetlb=
	awk '($2 == "/sys/fs/cgroup" && $3 == "cgroup2") || ($3 == "cgroup" && $4 ~ /(^|,)hugetlb(,|$)/) {f = 1} END {exit !f}' /proc/self/mounts ||
		hugetlb=' | del(.linux.resources.hugepageLimits?)'
	# (No "&&" after the here-document: `declare -f`, which the nodes
	# stage uses to hand node B every function, prints it in a form bash
	# cannot read back.)
	mkdir -p "$pw/bin" || return 1
	cat >"$pw/bin/runc-crio" <<-EOF
		#!/bin/bash
		min=\$(cat /proc/self/oom_score_adj)
		prev= files=()
		for a in "\$@"; do
		    case \$prev in --bundle | -b) files+=("\$a/config.json") ;; --process | -p) files+=("\$a") ;; esac
		    case \$a in --bundle=*) files+=("\${a#--bundle=}/config.json") ;; --process=*) files+=("\${a#--process=}") ;; esac
		    prev=\$a
		done
		for f in "\${files[@]}"; do
		    [ -f "\$f" ] || continue
		    jq --argjson m "\$min" 'def clamp: if .oomScoreAdj != null and .oomScoreAdj < \$m then .oomScoreAdj = \$m else . end;
		        if has("process") then .process |= clamp$hugetlb else clamp end' "\$f" >"\$f.lane" && mv "\$f.lane" "\$f" || exit 1
		done
		exec $(command -v runc) "\$@"
	EOF
	chmod +x "$pw/bin/runc-crio"
}

# start_crio: CRI-O in the background (its log $pw/crio.log, the plugins'
# stderr there too), until it answers.
start_crio() {
	mkdir -p "$pw/crio/hooks.d" "$pw/crio/cdi" "$pw/crio/conf.d"
	daemon crio "$crio_bin/crio" --config "$pw/crio.conf" --config-dir "$pw/crio/conf.d" --log-level info
	until_ok 150 cri info >/dev/null 2>&1 || {
		alive crio
		return 1
	}
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
		containerRuntimeEndpoint: unix://$sock
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
	# The cluster's DNS, for the stages that run one (scripts/kube/e2e.sh).
	[ -z "${kube_cluster_dns:-}" ] || printf 'clusterDNS: [%s]\nclusterDomain: cluster.local\n' "$kube_cluster_dns" >>"$pw/kubelet.yaml"
	echo "nameserver $hostaddr" >"$pw/resolv.conf"
	daemon kubelet kubelet --config "$pw/kubelet.yaml" --kubeconfig "$pw/admin.kubeconfig" \
		--hostname-override "$node" --node-ip "$hostaddr" --v=1
	until_ok 300 k get node "$node" >/dev/null 2>&1 || {
		alive kubelet "$runtime_daemon"
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
# --- pods ---------------------------------------------------------------------

# kv_json KEY=VALUE...: the pairs as one JSON object ({} for none); a
# VALUE may hold any character, newlines and "=" too.
kv_json() {
	jq -nc '[$ARGS.positional[] | index("=") as $i | {key: .[:$i], value: .[$i + 1:]}] | from_entries' --args -- "$@"
}

# pod_apply NAME [OPTION...] -- COMMAND...: apply (no wait) a pod of the
# lane's image running COMMAND. Options, each repeatable:
#   --label KEY=VALUE, --annotation KEY=VALUE
#   --bandwidth BW   the ingress and egress bandwidth annotations
#   --hostport PORT  PORT mapped to the container's port 80 (named hpPORT)
#   --node NODE      spec.nodeName
pod_apply() {
	local name=$1 node="" labels=() notes=() ports=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		case $1 in
		--label) labels+=("$2") ;;
		--annotation) notes+=("$2") ;;
		--bandwidth) notes+=("kubernetes.io/ingress-bandwidth=$2" "kubernetes.io/egress-bandwidth=$2") ;;
		--hostport) ports+=("$2") ;;
		--node) node=$2 ;;
		*) echo "pod_apply: unknown option [$1]" && return 2 ;;
		esac
		shift 2
	done
	shift
	jq -n --arg name "$name" --arg node "$node" \
		--argjson labels "$(kv_json "${labels[@]}")" --argjson notes "$(kv_json "${notes[@]}")" \
		--argjson ports "$(jq -nc '[$ARGS.positional[] | tonumber]' --args -- "${ports[@]}")" \
		--argjson cmd "$(jq -nc '$ARGS.positional' --args -- "$@")" '
		def unless_empty(k; v): if v == {} or v == [] or v == "" then {} else {(k): v} end;
		{apiVersion: "v1", kind: "Pod",
		  metadata: ({name: $name, namespace: "default"} + unless_empty("labels"; $labels) + unless_empty("annotations"; $notes)),
		  spec: (unless_empty("nodeName"; $node) + {terminationGracePeriodSeconds: 1, automountServiceAccountToken: false,
		    containers: [{name: "main", image: "localhost/cniforge-lane:1", imagePullPolicy: "Never", command: $cmd}
		      + unless_empty("ports"; [$ports[] | {containerPort: 80, hostPort: ., name: "hp\(.)"}])]})}' \
		>"$pw/$name.json" || return 1
	k apply -f "$pw/$name.json" >/dev/null
}

# pod NAME [OPTION...] -- COMMAND...: pod_apply, then wait until the pod is
# Ready (its description on failure).
pod() {
	pod_apply "$@" && k wait --for=condition=Ready "pod/$1" --timeout 120s >/dev/null || {
		k describe pod "$1" | tail -n 20
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
	pod warm --hostport 8089 -- sleep 3600 && k delete pod warm --wait --timeout 60s >/dev/null
}

same_state() {
	local bad=()
	state >"$pw/state.now"
	diff -u "$pw/state.before" "$pw/state.now" || bad+=("the node differs from before the first pod")
	[ -z "$(ip -o link show type veth | grep -v '^[0-9]*: lh0@')" ] || bad+=("veth left")
	[ -z "$(ip -o link show type ifb)" ] || bad+=("ifb left")
	[ -z "$(ls -A /var/lib/cni/results 2>/dev/null)" ] || bad+=("libcni cache entries left: $(ls /var/lib/cni/results)")
	[ -z "$(ls "/var/lib/cni/networks/$net" | grep '^[0-9]')" ] || bad+=("host-local reservations left: $(ls "/var/lib/cni/networks/$net" | grep '^[0-9]')")
	all_clear "${bad[@]}"
}

# The second rollout: a new image tag; the kubelet replaces the pod, the
# new one replaces the binaries while a pod keeps running; a pod started
# after gets its network.
finish() {
	local p
	for p in "$pw"/*.pid; do
		[ ! -s "$p" ] || kill "$(cat "$p")" 2>/dev/null
	done
	echo "$passed $failed $skipped" >"$pw/counts"
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


# start_kube_proxy MODE: kube-proxy in MODE (iptables, nftables) for the
# node, until stop_kube_proxy. It sets no global conntrack sysctl (the
# table size is the host's), and its Services answer once it has synced.
start_kube_proxy() {
	daemon kube-proxy kube-proxy --kubeconfig "$pw/admin.kubeconfig" \
		--hostname-override "$node" --cluster-cidr "$clustercidr" --proxy-mode "$1" \
		--conntrack-max-per-core 0 --metrics-bind-address 127.0.0.1:10249 \
		--healthz-bind-address 127.0.0.1:10256 --v=1
	until_ok 300 curl -sf http://127.0.0.1:10256/healthz >/dev/null || {
		alive kube-proxy
		tail -n 20 "$pw/kube-proxy.log"
		return 1
	}
}

# stop_kube_proxy MODE: kube-proxy stopped and its MODE rules removed
# (kube-proxy --cleanup), as an operator switching modes does.
stop_kube_proxy() {
	local pid
	pid=$(cat "$pw/kube-proxy.pid" 2>/dev/null)
	# Gone before --cleanup: a kube-proxy still syncing would put back
	# what --cleanup removes.
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null && until_ok 150 eval "! kill -0 $pid 2>/dev/null"; }
	rm -f "$pw/kube-proxy.pid"
	kube-proxy --cleanup --proxy-mode "$1" >>"$pw/kube-proxy.log" 2>&1
}

# kube_proxy_leftovers BEFORE: what kube-proxy --cleanup leaves (kube-proxy's
# behaviour, met with upstream's plugins too): its KUBE-FIREWALL chain and
# the INPUT and OUTPUT jumps to it (IPv6 filter), and the empty base chains
# iptables-nft made when it ran. Only chains not in BEFORE (nft_chains'
# list, taken before kube-proxy ran), and a base chain only while it is
# empty (so KUBE-FIREWALL and the jumps to it go first). The proxy and e2e
# stages both use it.
kube_proxy_leftovers() {
	local f t c hook ipt
	while read -r f t c hook; do
		if [ "$c" = KUBE-FIREWALL ] && [ "$t" = filter ]; then
			ipt=iptables
			[ "$f" = ip ] || ipt=ip6tables
			"$ipt" -t filter -D INPUT -j KUBE-FIREWALL 2>/dev/null
			"$ipt" -t filter -D OUTPUT -j KUBE-FIREWALL 2>/dev/null
			"$ipt" -t filter -F KUBE-FIREWALL && "$ipt" -t filter -X KUBE-FIREWALL || return 1
		elif [ "$hook" = true ] && [ -z "$(nft -j list chain "$f" "$t" "$c" | jq '.nftables[] | .rule? // empty')" ]; then
			nft delete chain "$f" "$t" "$c" || return 1
		fi
	done < <(nft_chains | grep -vxFf "$1" | awk '{print ($3 != "KUBE-FIREWALL"), $0}' | sort -n | cut -d" " -f2-)
}

# nft_chains: every nft chain (iptables-nft's too): family, table, name,
# and whether it is a base chain.
nft_chains() {
	nft -j list chains | jq -r '.nftables[] | .chain? // empty | "\(.family) \(.table) \(.name) \(.hook != null)"'
}
