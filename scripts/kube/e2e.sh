# e2e.sh — stage 6 of the Kubernetes lane (scripts/kube-lane.sh):
# Kubernetes' own tests. e2e.test v1.34.4 (scripts/kube-deps.sh) runs the
# [sig-network] [Conformance] specs that are not [Serial], [Disruptive],
# [Flaky] or [Slow] against the lane's cluster, with kube-proxy (iptables
# mode) and CoreDNS (a Deployment behind Service kube-dns) beside our
# plugins. One check per spec; the specs it skipped are listed with why
# (`skip - `), never counted as passed.
#
# No registry: agnhost (the real binary, run as its own image runs, with
# bash as /bin/sh and real nc, dig, curl, ip and getent; the same folder
# also as jessie-dnsutils, the DNS specs' second querier, always given a
# shell command), CoreDNS and the pause image are written under the names e2e and the cluster ask for by
# scripts/criimages (prepare_e2e, on the real host before the node starts)
# and imported here; e2e's pods pull IfNotPresent, so they are used as is.
# shellcheck shell=bash disable=SC2154 # set by kube-lane.sh

e2e_dir=.cache/kube/e2e-$k8s_version
# CNIFORGE_KUBE_E2E_FOCUS narrows the run (a regex of spec texts), to
# iterate on a few specs.
e2e_dns=10.96.0.10
e2e_focus=${CNIFORGE_KUBE_E2E_FOCUS:-'\[sig-network\].*\[Conformance\]'}
e2e_skip='\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]'
# The kubelet gives pods the cluster's DNS (node.sh's start_kubelet reads
# these; set only when this stage runs).
kube_cluster_dns=$e2e_dns
# e2e.test takes about 7 minutes alone, far more on a busy node: the
# lane's time limit grows by its own.
lane_timeout=$((${lane_timeout:-900} + 2400))

# agnhost_rootfs DIR: agnhost's image as a folder, as its Dockerfile makes
# it: /agnhost (and the /agnhost-2 link), porter's localhost.crt and .key,
# /coredns, /uploads; users uid 1000 and gid 50000; bash as /bin/sh and the
# real nc, dig, curl, ip, ss and getent with their libraries (Debian's
# static busybox sh runs its own applets first, and its nc has no -u);
# busybox's other applets in /bin, after them on PATH, its wget left out
# (its -T crashes).
agnhost_rootfs() {
	local d=$1 t p l a
	mkdir -p "$d/usr/bin" "$d/bin" "$d/etc" "$d/uploads" "$d/root" "$d/home/user-defined-in-image" || return 1
	mkdir -m 1777 "$d/tmp" || return 1
	for l in /lib /lib64; do
		[ ! -L "$l" ] || ln -s "$(readlink "$l")" "$d$l" || return 1
	done
	cp "$e2e_dir/agnhost" "$e2e_dir/coredns" "$e2e_dir/localhost.crt" "$e2e_dir/localhost.key" "$d/" &&
		ln -s agnhost "$d/agnhost-2" || return 1
	for t in bash nc dig curl ip ss getent; do
		p=$(command -v "$t") || {
			echo "agnhost's image needs $t (see .ci/run's apt line)"
			return 1
		}
		cp -L "$p" "$d/usr/bin/$t" || return 1
		for l in $(ldd "$p" | grep -o '/[^ ]*'); do
			mkdir -p "$d$(readlink -f "$(dirname "$l")")" &&
				cp -L "$l" "$d$(readlink -f "$(dirname "$l")")/$(basename "$l")" || return 1
		done
	done
	for l in "$(dirname "$(ldd "$(command -v getent)" | grep -o '/[^ ]*libc.so[^ ]*')")"/libnss_{files,dns}.so.2; do
		[ ! -e "$l" ] || cp -L "$l" "$d$(readlink -f "$(dirname "$l")")/" || return 1
	done
	ln -s ../usr/bin/bash "$d/bin/sh" && ln -s ../usr/bin/bash "$d/bin/bash" &&
		cp "$(command -v busybox)" "$d/bin/busybox" || return 1
	for a in $("$d/bin/busybox" --list); do
		[ -e "$d/bin/$a" ] || [ -e "$d/usr/bin/$a" ] || [ "$a" = wget ] || ln -s busybox "$d/bin/$a" || return 1
	done
	cat >"$d/etc/passwd" <<-EOF
		root:x:0:0:root:/root:/bin/sh
		user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh
	EOF
	cat >"$d/etc/group" <<-EOF
		root:x:0:
		user-defined-in-image:x:1000:
		group-defined-in-image:x:50000:user-defined-in-image
	EOF
	printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$d/etc/nsswitch.conf"
}

# prepare_e2e WORK (on the real host, before the node starts): the stage's
# images as WORK/e2e-images.tar.
prepare_e2e() {
	local work=$1 v
	v=$(cat "$e2e_dir/agnhost-VERSION") &&
		agnhost_rootfs "$work/agnhost-root" &&
		go run ./scripts/criimages -o "$work/e2e-images.tar" -rootfs "$work/rootfs" \
			-ref localhost/cniforge-lane:1 -catatonit "$(command -v catatonit)" \
			-pause-ref "$(e2e_list_image pause)" \
			-agnhost-rootfs "$work/agnhost-root" -agnhost-ref "registry.k8s.io/e2e-test-images/agnhost:$v,$(e2e_list_image jessie-dnsutils)" \
			-coredns "$e2e_dir/coredns" -coredns-ref registry.k8s.io/coredns/coredns:v1.12.4
}

# e2e_list_image NAME: the image NAME e2e.test asks for (its --list-images).
e2e_list_image() {
	"$e2e_dir/e2e.test" --list-images 2>/dev/null | grep -m1 "/$1:"
}

e2e_import() {
	local ctr_bin=ctr
	[ "$runtime" != containerd2 ] || ctr_bin=$PWD/.cache/cri/containerd-v2.4.2/ctr
	"$ctr_bin" --address "$sock" -n k8s.io images import --snapshotter overlayfs "$work/e2e-images.tar" >/dev/null
}

# CoreDNS as a cluster runs it: a Deployment behind Service kube-dns at
# $e2e_dns, answering for cluster.local from the API.
start_coredns() {
	cat >"$pw/coredns.yaml" <<-EOF
		apiVersion: v1
		kind: ConfigMap
		metadata: {name: coredns, namespace: kube-system}
		data:
		  Corefile: |
		    .:53 {
		        errors
		        health :8080
		        ready :8181
		        kubernetes cluster.local in-addr.arpa ip6.arpa {
		            pods insecure
		            fallthrough in-addr.arpa ip6.arpa
		            ttl 30
		        }
		        cache 30
		        loadbalance
		    }
		---
		apiVersion: apps/v1
		kind: Deployment
		metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
		spec:
		  replicas: 1
		  selector: {matchLabels: {k8s-app: kube-dns}}
		  template:
		    metadata: {labels: {k8s-app: kube-dns}}
		    spec:
		      dnsPolicy: Default
		      terminationGracePeriodSeconds: 1
		      containers:
		      - name: coredns
		        image: registry.k8s.io/coredns/coredns:v1.12.4
		        imagePullPolicy: IfNotPresent
		        args: [-conf, /etc/coredns/Corefile]
		        ports:
		        - {name: dns, containerPort: 53, protocol: UDP}
		        - {name: dns-tcp, containerPort: 53, protocol: TCP}
		        readinessProbe:
		          httpGet: {path: /ready, port: 8181}
		          periodSeconds: 2
		        volumeMounts:
		        - {name: config, mountPath: /etc/coredns, readOnly: true}
		      volumes:
		      - name: config
		        configMap: {name: coredns}
		---
		apiVersion: v1
		kind: Service
		metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
		spec:
		  clusterIP: $e2e_dns
		  selector: {k8s-app: kube-dns}
		  ports:
		  - {name: dns, port: 53, protocol: UDP}
		  - {name: dns-tcp, port: 53, protocol: TCP}
	EOF
	# A node has a default route; the lane's has none, and a packet to a
	# ClusterIP needs a route before kube-proxy's OUTPUT DNAT sees it.
	# Removed by e2e_cleanup.
	if [ -z "$(ip route show default)" ]; then
		ip route add default via "$clientaddr" && touch "$pw/e2e.route" || return 1
	fi
	k apply -f "$pw/coredns.yaml" >/dev/null &&
		k -n kube-system rollout status deploy/coredns --timeout 180s >/dev/null || {
		k -n kube-system get pods -o wide
		k -n kube-system describe pods -l k8s-app=kube-dns | tail -n 30
		return 1
	}
	# From the node, through kube-proxy's Service rules.
	until_ok 150 e2e_dig >/dev/null || e2e_dig
}

e2e_dig() {
	local a
	a=$(dig +short +time=2 +tries=1 "@$e2e_dns" kubernetes.default.svc.cluster.local A 2>&1)
	[ "$a" = 10.96.0.1 ] || {
		echo "kubernetes.default.svc.cluster.local at kube-dns $e2e_dns: [$a]"
		return 1
	}
}

# run_e2e: e2e.test's run, its Ginkgo JSON report in $pw/e2e/report.json.
run_e2e() {
	mkdir -p "$pw/e2e"
	echo "kube-lane: e2e.test [sig-network] [Conformance] (its log: $pw/e2e/e2e.log)"
	"$e2e_dir/e2e.test" --kubeconfig "$pw/admin.kubeconfig" \
		--ginkgo.focus "$e2e_focus" --ginkgo.skip "$e2e_skip" \
		--ginkgo.json-report "$pw/e2e/report.json" --ginkgo.no-color --ginkgo.v \
		--ginkgo.timeout 60m --report-dir "$pw/e2e" \
		--dns-domain cluster.local >"$pw/e2e/e2e.log" 2>&1
	[ -s "$pw/e2e/report.json" ] || {
		tail -n 40 "$pw/e2e/e2e.log"
		return 1
	}
}

# e2e_specs: every spec of the report that the focus matched, one JSON
# object a line: {text, state, why}.
e2e_specs() {
	jq -c --arg f "$e2e_focus" --arg s "$e2e_skip" '
	  .[0].SpecReports[] | select(.LeafNodeType == "It")
	  | {text: ((.ContainerHierarchyTexts // []) + [.LeafNodeText] | join(" ")), state: .State,
	     why: ((.Failure.Message // "") | split("\n")[0])}
	  | select(.text | test($f))
	  | if .state == "skipped" and (.text | test($s)) then .why = "not run here: \(.text | [scan($s)] | join(" "))" else . end' \
		"$pw/e2e/report.json"
}

# e2e_spec_result LINE: a spec's result (e2e_specs's LINE); a failed one
# shows the first line of its failure (the rest is in $pw/e2e/e2e.log).
e2e_spec_result() {
	local st
	st=$(jq -r .state <<<"$1")
	[ "$st" = passed ] || {
		echo "$st: $(jq -r .why <<<"$1")"
		jq -r '.text' <<<"$1"
		return 1
	}
}

# e2e_cleanup: e2e's namespaces gone, CoreDNS deleted, kube-proxy stopped
# with its rules; then the node holds what it held before.
e2e_cleanup() {
	local left
	k delete -f "$pw/coredns.yaml" --wait --timeout 120s >/dev/null
	until_ok 900 bash -c '[ -z "$(kubectl --kubeconfig "$1" get ns -o name | grep -Ev "^namespace/(default|kube-system|kube-public|kube-node-lease)$")" ]' - "$pw/admin.kubeconfig" || {
		left=$(k get ns -o name | grep -Ev '^namespace/(default|kube-system|kube-public|kube-node-lease)$')
		echo "namespaces left: $left"
		return 1
	}
	until_ok 300 bash -c '[ -z "$(kubectl --kubeconfig "$1" -n kube-system get pods -l k8s-app=kube-dns -o name)" ]' - "$pw/admin.kubeconfig" || {
		echo "CoreDNS's pod is left"
		return 1
	}
	stop_kube_proxy iptables
	kube_proxy_leftovers "$pw/e2e.chains" || return 1
	[ ! -e "$pw/e2e.route" ] || ip route del default via "$clientaddr" || return 1
	rm -f "$pw/e2e.route"
	until_ok 150 same_state >/dev/null || same_state
}



stage_e2e() {
	local line t0=$SECONDS n=0 ns=0
	[ "$runtime" != crio ] || {
		skip "the e2e stage runs on containerd only (its images go in with ctr; CRI-O's storage is filled before it starts)"
		return
	}
	nft_chains >"$pw/e2e.chains"
	check "e2e's images (agnhost, CoreDNS, pause under e2e's names) imported" e2e_import
	check "kube-proxy (iptables mode) starts" start_kube_proxy iptables
	check "CoreDNS runs behind Service kube-dns ($e2e_dns) and answers kubernetes.default from the node" start_coredns
	check "e2e.test runs the [sig-network] [Conformance] specs (skipping [Serial], [Disruptive], [Flaky], [Slow]) and writes its report" run_e2e
	if [ -s "$pw/e2e/report.json" ]; then
		while read -r line; do
			n=$((n + 1))
			case $(jq -r .state <<<"$line") in
			skipped | pending)
				ns=$((ns + 1))
				skip "e2e: $(jq -r '.text + " (" + .why + ")"' <<<"$line")"
				;;
			*) check "e2e: $(jq -r .text <<<"$line")" e2e_spec_result "$line" ;;
			esac
		done < <(e2e_specs)
		echo "kube-lane: e2e.test: $n specs matched $e2e_focus, $ns of them skipped, in $((SECONDS - t0)) s"
	fi
	check "e2e's namespaces, CoreDNS and kube-proxy's rules gone: the node holds what it held before" e2e_cleanup
}
