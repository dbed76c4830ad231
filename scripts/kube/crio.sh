# crio.sh — stage 7 of the Kubernetes lane (scripts/kube-lane.sh), run
# with --runtime crio: what CRI-O v1.34 does with CNI that containerd does
# not, each against our plugins.
# - It runs CHECK right after every ADD (ocicni's GetPodNetworkStatus),
#   and for every pod when it starts again.
# - It runs GC when it starts (libcni's GCNetworkList, cniVersion 1.1.0):
#   a DEL of every cached attachment of no pod it knows, then GC with
#   cni.dev/valid-attachments.
# - It sends bandwidth bursts of math.MaxUint32*8-1 = 34359738359 bits
#   whatever the pod asks (server/sandbox_network.go), more than tbf holds.
# - It makes hostPorts itself (its own hostport manager, always, unless
#   disable_hostport_mapping) and never hands portMappings to the
#   conflist: portmap is called with none, and must do nothing.
# How the calls are seen: ocicni logs each ADD, CHECK and DEL in CRI-O's
# log, and our plugins' stderr (a clamped burst's warning) lands there too.
# shellcheck shell=bash disable=SC2154 # set by kube-lane.sh

crio_burst=34359738359 # math.MaxUint32*8 - 1, CRI-O's burst in bits

# crio_log_since N: CRI-O's log from line N on.
crio_log_since() {
	tail -n "+$1" "$pw/crio.log"
}

crio_log_lines() {
	wc -l <"$pw/crio.log"
}

# A hostPort pod (8085) with 10M bandwidth annotations; CRI-O's log shows
# the ADD and, after it, the CHECK of the pod's network, which passed.
check_crio_check_after_add() {
	local from log
	from=$(($(crio_log_lines) + 1))
	pod cw --hostport 8085 --bandwidth 10M -- httpd -f -p 80 -h /www || return 1
	until_ok 25 fetch "http://$hostaddr:8085/" client || return 1
	log=$(crio_log_since "$from")
	awk -v add="Adding pod default_cw to CNI network" \
		-v chk="Checking pod default_cw for CNI network $net " \
		-v ok="Checking CNI network $net (config version=1.1.0)" '
		index($0, add) {a = NR}
		a && !c && index($0, chk) {c = NR}
		c && !o && index($0, ok) {o = NR}
		/Error checking network/ {bad = $0}
		END {exit !(a && c && o && !bad)}' <<<"$log" || {
		echo "CRI-O's log since the pod was applied has no ADD, then CHECK, then a passed CHECK:"
		grep -E 'CNI network|Error checking' <<<"$log"
		return 1
	}
	grep -E "default_cw|Checking CNI network" <<<"$log" | sed -E 's/.*msg="([^"]*(\\"[^"]*)*)".*/\1/'
}

# CRI-O's burst reached bandwidth (its warning, on its stderr, lands in
# CRI-O's log: bits= what CRI-O sent, installed= what tbf holds), which
# clamped it to the largest burst tbf holds at 10 Mbit/s (2^32-1 of the
# kernel's ticks of traffic); the tbf on the host veth has that burst.
check_crio_burst() {
	local veth q w installed
	w=$(grep -E "msg=\"burst clamped.*containerID=$(sandbox cw) .*key=runtimeConfig.bandwidth.ingressBurst bits=$crio_burst rate=10000000 installed=[0-9]+" "$pw/crio.log" | tail -n 1)
	installed=$(sed -nE 's/.* installed=([0-9]+).*/\1/p' <<<"$w")
	[ -n "$installed" ] && [ "$installed" -lt "$crio_burst" ] || {
		echo "no 'burst clamped' warning from bandwidth for pod cw's ingressBurst bits=$crio_burst in CRI-O's log:"
		grep 'burst clamped' "$pw/crio.log" | tail -n 2
		return 1
	}
	veth=$(host_veth cw) && [ -n "$veth" ] || {
		echo "no host veth for pod cw"
		return 1
	}
	# tc gives the burst back from tbf's buffer in ticks: within 0.1%.
	q=$(tc -j qdisc show dev "$veth" | jq -c '.[] | select(.kind == "tbf") | .options')
	jq -e --argjson b "$((installed / 8))" '.rate == 1250000 and (.burst - $b | fabs) <= $b / 1000' <<<"$q" >/dev/null || {
		echo "the tbf on $veth is not 10Mbit with a burst of $((installed / 8)) bytes: $q"
		return 1
	}
	echo "CRI-O sent $crio_burst bits, bandwidth installed $installed; tbf on $veth: $q"
}

# The hostPort is CRI-O's: it has the DNAT (its nft table or iptables
# chain names 8085), portmap (in the conflist, called without
# portMappings) wrote no rule.
check_crio_hostport_own() {
	local fam name others=''
	! iptables-save | grep -E 'CNI-DN|CNI-HOSTPORT|8085' || {
		echo "portmap wrote iptables rules though CRI-O sends no portMappings"
		return 1
	}
	while read -r _ fam name; do
		[ "$name" = crio-hostports ] || others+=$(nft list table "$fam" "$name")
	done < <(nft list tables)
	! grep 8085 <<<"$others" || {
		echo "a table not CRI-O's holds 8085"
		return 1
	}
	nft list table ip crio-hostports | grep 8085 || {
		echo "CRI-O's nftables table crio-hostports does not hold 8085:"
		nft list table ip crio-hostports
		return 1
	}
}

# leak_attachment ID: what a runtime killed mid-life leaves: the
# conflist's attachment for container ID (a veth, host-local's lease,
# bridge's masquerade rules, an ifb with a tbf; portmap called as CRI-O
# calls it, without portMappings) made by running its plugins in order as
# libcni does, libcni's cache entry for it, and then its netns removed.
leak_attachment() {
	local id=$1 conf=$pw/net.d/10-lane.conflist n i type pc out prev='' caps
	ip netns add leak || return 1
	# CRI-O's capability args: bandwidth, never portMappings.
	caps='{"bandwidth": {"ingressRate": 1000000, "ingressBurst": 8000000, "egressRate": 1000000, "egressBurst": 8000000}}'
	n=$(jq '.plugins | length' "$conf")
	for ((i = 0; i < n; i++)); do
		pc=$(jq -c --argjson i "$i" --arg prev "$prev" --argjson caps "$caps" '
			.plugins[$i] as $p
			| $p + {name, cniVersion}
			| if $prev != "" then . + {prevResult: ($prev | fromjson)} else . end
			| if $p.capabilities then
				. + {runtimeConfig: ($caps | with_entries(select(.key as $k | $p.capabilities[$k])))}
			  else . end
			| del(.capabilities)' "$conf") || return 1
		type=$(jq -r .type <<<"$pc")
		out=$(CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/run/netns/leak CNI_IFNAME=eth0 \
			CNI_PATH=$cnidir "$cnidir/$type" <<<"$pc" 2>&1) || {
			echo "ADD of the leak's $type: $out"
			return 1
		}
		prev=$out
	done
	mkdir -p /var/lib/cni/results &&
		jq -n --arg id "$id" --arg net "$net" --arg conf "$(base64 -w0 "$conf")" \
			--argjson caps "$caps" --argjson res "$prev" '
		{kind: "cniCacheV1", containerId: $id, config: $conf, ifName: "eth0",
		 networkName: $net, netns: "/run/netns/leak",
		 cniArgs: [["IgnoreUnknown", "1"], ["K8S_POD_NAMESPACE", "default"], ["K8S_POD_NAME", "leaked"]],
		 capabilityArgs: $caps, result: $res}' >"/var/lib/cni/results/$net-$id-eth0" &&
		ip netns del leak
}

# stop_crio: CRI-O stopped (SIGTERM: it leaves the pods' containers to
# conmon), until it exited.
stop_crio() {
	kill "$(cat "$pw/crio.pid")" && until_ok 150 bash -c '! kill -0 "$1" 2>/dev/null' - "$(cat "$pw/crio.pid")"
}

# checked_since N COUNT: CRI-O's log from line N on has COUNT pod CHECKs.
checked_since() {
	[ "$(crio_log_since "$1" | grep -c "Checking pod default_.* for CNI network")" -ge "$2" ]
}

# state_is FILE: the node's state is FILE's, but for host-local's index
# (.cniforge/: a cache of the reservations, rebuilt when they change).
state_is() {
	state >"$pw/state.now" && diff -q <(grep -v /.cniforge/ "$1") <(grep -v /.cniforge/ "$pw/state.now") >/dev/null
}

# sandboxes: the running pods' names and sandbox IDs.
sandboxes() {
	cri pods --state ready --namespace default -o json | jq -r '.items[] | "\(.metadata.name) \(.id)"' | sort
}

# CRI-O restarted with two pods running and leaks waiting: at its start it
# CHECKs every pod's network (passes) and keeps the same sandboxes; the
# pods keep their network; GC reclaims the leaks (a cached attachment
# whose netns is gone, by DEL; a host-local reservation of a container
# nobody knows, by GC) and leaves the live pods' leases, rules and qdiscs:
# the node is exactly as before the leaks.
check_crio_restart() {
	local from log before after p rc=0 leakid=cniforgeleak0001
	pod cw2 -- httpd -f -p 80 -h /www || return 1
	before=$(sandboxes)
	state >"$pw/state.live"
	leak_attachment "$leakid" || return 1
	printf 'cniforge-unknown-container\r\neth0' >"/var/lib/cni/networks/$net/10.88.0.250"
	state >"$pw/state.leaked"
	# The leaks are there (else the GC check below proves nothing).
	! diff -q "$pw/state.live" "$pw/state.leaked" >/dev/null || {
		echo "the leaks changed nothing on the node"
		return 1
	}
	grep -q '^bwp' <(ip -o link show type ifb | awk -F': ' '{print $2}') || {
		echo "the leaked attachment has no ifb"
		return 1
	}
	stop_crio || {
		echo "CRI-O did not stop"
		return 1
	}
	from=$(($(crio_log_lines) + 1))
	start_crio || return 1
	# The pods' CHECKs come once CRI-O has restored them.
	until_ok 150 checked_since "$from" 2 || rc=1
	log=$(crio_log_since "$from")
	for p in cw cw2; do
		grep -q "Checking pod default_$p for CNI network $net " <<<"$log" || {
			echo "no CHECK of pod $p at CRI-O's start"
			rc=1
		}
	done
	# (Sandboxes of deleted pods the kubelet has not removed yet fail their
	# CHECK with no netns: CRI-O's, not ours.)
	for p in $before; do
		[ "${#p}" = 64 ] || continue
		! grep -E "Could not restore sandbox IP for $p|Error checking network.*$p" <<<"$log" || rc=1
	done
	after=$(sandboxes)
	[ "$before" = "$after" ] || {
		echo "the sandboxes changed across the restart: [$before] -> [$after]"
		rc=1
	}
	# GC: the node as before the leaks.
	until_ok 100 state_is "$pw/state.live" || {
		state >"$pw/state.now"
		echo "GC did not bring the node back to before the leaks:"
		diff -u <(grep -v /.cniforge/ "$pw/state.live") <(grep -v /.cniforge/ "$pw/state.now")
		rc=1
	}
	[ "$rc" = 0 ] || return 1
	grep -E "Checking pod|stale|Garbage" <<<"$log" | sed -E 's/.*msg="([^"]*(\\"[^"]*)*)".*/\1/'
	echo "sandboxes kept: $after"
}

check_crio_restart_network() {
	until_ok 25 fetch "http://$hostaddr:8085/" client && in_pod cw2 "http://$(pod_ip cw)/"
}

# Without portmap in the conflist, a hostPort pod is reached just the
# same (CRI-O's DNAT), and deleting it leaves nothing.
check_crio_hostport_without_portmap() {
	local conf=$pw/net.d/10-lane.conflist rc=0
	cp "$conf" "$pw/conflist.with-portmap"
	jq '.plugins |= map(select(.type != "portmap"))' "$pw/conflist.with-portmap" >"$conf.tmp" && mv "$conf.tmp" "$conf" || return 1
	# CRI-O reloads the conf dir on change; the next pod uses the new list.
	until_ok 100 grep -q "CNI monitoring event.*10-lane.conflist" "$pw/crio.log"
	sleep 1
	pod np --hostport 8086 -- httpd -f -p 80 -h /www &&
		until_ok 25 fetch "http://$hostaddr:8086/" client &&
		fetch "http://$hostaddr:8086/" || rc=1
	[ "$rc" != 0 ] || jq -e '[.config | @base64d | fromjson | .plugins[].type] | index("portmap") | not' \
		"/var/lib/cni/results/$net-$(sandbox np)-eth0" >/dev/null || {
		echo "pod np was attached with portmap in its list"
		rc=1
	}
	k delete pod np --wait --timeout 60s >/dev/null || rc=1
	cp "$pw/conflist.with-portmap" "$conf.tmp" && mv "$conf.tmp" "$conf"
	return "$rc"
}

check_crio_delete() {
	k delete pod cw cw2 --wait --timeout 60s >/dev/null || return 1
	until_ok 100 same_state >/dev/null || same_state
}

stage_crio() {
	[ "$runtime" = crio ] || {
		skip "the crio stage runs only with --runtime crio"
		return
	}
	check "CRI-O runs CHECK right after ADD (its log), and it passes: a hostPort pod (8085, 10M bandwidth) runs and is reached" check_crio_check_after_add
	check "CRI-O's bandwidth burst ($crio_burst bits) is clamped by bandwidth (its warning) and the tbf holds 10Mbit with the largest burst it can" check_crio_burst
	check "CRI-O makes the hostPort itself; portmap, called without portMappings, writes no rule" check_crio_hostport_own
	check "CRI-O restarted with pods running: it CHECKs every pod (passes), the sandboxes are kept; its GC reclaims a leaked attachment (netns gone) and a reservation of an unknown container, live pods untouched" check_crio_restart
	check "the pods keep their network across CRI-O's restart (hostPort from outside, pod to pod)" check_crio_restart_network
	check "without portmap in the conflist a hostPort pod is reached just the same (from outside and the node), and its deletion leaves nothing" check_crio_hostport_without_portmap
	check "kubectl delete of the pods leaves nothing (leases, rules, qdiscs, ifbs, veths, netns files, libcni cache)" check_crio_delete
}
