# pods.sh — stage 2 of the Kubernetes lane (scripts/kube-lane.sh): pods
# through the kubelet (hostPort, bandwidth annotations, pod to pod, pod to
# outside, deletion leaving nothing), then a second rollout of the
# DaemonSet while pods run.
# shellcheck shell=bash disable=SC2154 # set by kube-lane.sh

check_web() {
	pod web --hostport 8083 --bandwidth 10M -- httpd -f -p 80 -h /www || return 1
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
	pod other -- sleep 3600 || return 1
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
check_rollout() {
	local ino1 ino2 loop rc=0
	pod keep -- httpd -f -p 80 -h /www || return 1
	ino1=$(stat -c %i "$cnidir/cniforge")
	# A runtime exec'ing a plugin all through the rollout never fails.
	exec_while_replaced rollout
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
	replaced_from_image "the new image's pod" "$ino1" "$ino2" || return 1
	no_exec_failed rollout "the rollout" || return 1
	pod after --hostport 8084 -- httpd -f -p 80 -h /www || return 1
	until_ok 25 fetch "http://$hostaddr:8084/" client &&
		fetch "http://$(pod_ip keep)/" || return 1
	echo "cniforge replaced (inode $ino1 -> $ino2)"
	k delete pod keep after --wait --timeout 60s >/dev/null &&
		until_ok 100 same_state >/dev/null || same_state
}


stage_pods() {
	check "a hostPort pod (8083, 10M bandwidth annotations) runs; its page reached on the node's address $hostaddr:8083 from outside" check_web
	check "the hostPort reached from the node itself" check_web_from_node
	check "bandwidth annotations: tbf at 10Mbit on the pod's host veth and on its ifb" check_bandwidth
	check "pod to pod (kubectl exec, wget of the web pod's address)" check_pod2pod
	check "pod to outside ($clientaddr, which has no route to the pods): masqueraded as $hostaddr" check_outside
	check "kubectl delete of the pods leaves nothing (leases, rules, qdiscs, ifbs, veths, netns files, libcni cache)" check_delete
	if [ -n "$plugins_dir" ]; then
		skip "a second rollout of the DaemonSet (a comparison run installs no DaemonSet)"
	else
		check "a second rollout (node image lane2) replaces the binaries while a pod runs and a plugin is exec'd; the running pod and one started after are reached; deleting them leaves nothing" check_rollout
	fi
}
