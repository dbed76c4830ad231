# install.sh — stage 1 of the Kubernetes lane (scripts/kube-lane.sh): the
# node starts NotReady with an empty plugin folder; our DaemonSet from
# deploy/ installs the plugins and the node turns Ready. With --plugins DIR
# (a comparison run) DIR's plugins are copied in instead.
# shellcheck shell=bash disable=SC2154 # set by kube-lane.sh

check_not_ready() {
	local msg
	# The kubelet reports the runtime's state after its first sync, and
	# other reasons (CSINode not yet initialized) may come first.
	until_ok 150 bash -c 'kubectl --kubeconfig "$1" get node "$2" -o jsonpath="{.status.conditions[?(@.type==\"Ready\")].message}" | grep -q "network not ready"' - "$pw/admin.kubeconfig" "$node" || true
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
	# A here-string, not a pipe: under pipefail, kubectl's EPIPE when grep -q
	# has matched and exited would count as a failure.
	grep -q "installed into /host/opt/cni/bin" <<<"$(k -n kube-system logs ds/cniforge)" || {
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


# install_from_dir: a comparison run's install: every plugin of $plugins_dir
# copied into $cnidir, as a package manager would.
install_from_dir() {
	mkdir -p "$cnidir" && cp -a "$plugins_dir"/. "$cnidir"/ && ls "$cnidir/bridge" "$cnidir/host-local" "$cnidir/portmap" >/dev/null
}

# check_ready_without_plugins: containerd 1.6 runs no STATUS; its network
# is ready as soon as a conflist loads, whatever the plugin folder holds.
check_ready_without_plugins() {
	k wait --for=condition=Ready "node/$node" --timeout 120s >/dev/null || {
		k get node "$node" -o jsonpath='{.status.conditions}'
		return 1
	}
	[ -z "$(ls -A "$cnidir" 2>/dev/null)" ] || {
		echo "$cnidir is not empty: $(ls "$cnidir")"
		return 1
	}
}

stage_install() {
	if [ "$runtime" = containerd1 ]; then
		check "the node is Ready with $cnidir empty (containerd 1.6 runs no CNI STATUS: a conflist is enough)" check_ready_without_plugins
	else
		check "the node is NotReady (network not ready) with $cnidir empty" check_not_ready
	fi
	check "the controller manager gave the node the conflist's pod CIDR $podcidr" check_podcidr
	if [ -n "$plugins_dir" ]; then
		check "the plugins of $plugins_dir copied into $cnidir (a comparison run: no DaemonSet)" install_from_dir
	else
		check "kubectl apply deploy/cniforge-daemonset.yaml (image: the imported node image)" apply_daemonset
		check "the kubelet runs the DaemonSet's pod, it installs the image's cniforge and a link per plugin into $cnidir" check_ds_ready
	fi
	check "the node turns Ready" check_node_ready
	# Pods need a Ready node: without one each would only wait out its timeout.
	[ "$(node_ready)" = True ] || finish
	[ -n "$plugins_dir" ] ||
		check "every plugin of the node's conflist is cniforge's and answers VERSION 1.1.0" check_plugins
}
