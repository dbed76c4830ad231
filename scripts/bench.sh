#!/usr/bin/env bash
# Benchmarks the built plugins (bin/, or $CNIFORGE_BIN) the way a runtime
# drives them: one exec per operation, config on stdin. Everything runs in
# network namespaces this script creates and removes (a stand-in host and a
# container, "bench-*-<pid>"); the machine's own namespace is never touched.
#
#   scripts/bench.sh [-n N] [-c DIR] [scenario...]   (root; run ./build_linux.sh first)
#
# -c DIR compares: every timed cycle runs once with the binaries of
# $CNIFORGE_BIN (A) and once with those in DIR (B), in alternating order,
# so both see the same machine load; rows are "<scenario>@A" and "@B", and
# a B/A ratio of the medians follows (a CHECK of B that fails is not timed:
# upstream 1.1.1's portmap and tuning CHECK fail on these attachments).
# E.g. the multicall binary installed
# with links against the separate binaries:
#   bin/cniforge install --dir /tmp/multi && scripts/bench.sh -c /tmp/multi
#
# Scenarios (default: all whose plugins are built):
#   loopback          loopback (what a runtime runs for every pod): ADD,
#                     CHECK, DEL; almost all of it is the exec and the start
#                     of the process, so it shows what a plugin costs before
#                     main. The multicall binary against the separate one,
#                     and against upstream's (Debian's in /usr/lib/cni):
#                       bin/cniforge install --dir /tmp/multi
#                       scripts/bench.sh -c /tmp/multi loopback
#                       scripts/bench.sh -c /usr/lib/cni loopback
#   bridge-iptables   bridge + host-local, ipMasq on iptables: ADD, CHECK, DEL
#   bridge-nftables   bridge + host-local, ipMasq on nftables: ADD, CHECK, DEL
#   ptp-dual          ptp + host-local, IPv4 + IPv6:            ADD, CHECK, DEL
#   ptp-dual-masq     the same with ipMasq (default backend)
#   portmap-ipt-one   portmap (chained, synthetic prevResult), 1 mapping, iptables
#   portmap-ipt-many  the same with 1000 mappings (Podman's -p 20000-20999)
#   portmap-ipt-others 1 mapping, with another container's 1000 mappings on the node
#   portmap-nft-one, portmap-nft-many, portmap-nft-others: the same on nftables
#   macvlan           macvlan (bridge mode) on the stand-in host's uplink +
#                     host-local:                               ADD, CHECK, DEL
#   chain             bridge (ipMasq) → portmap (snat, one mapping) →
#                     bandwidth → tuning → firewall (iptables) as one
#                     conflist, prevResult passed along as libcni does: ADD,
#                     CHECK, DEL of the list, and each plugin's own time
#                     (op:plugin).
#   firewall-iptables firewall on iptables, chained (a fixed prevResult, one
#                     IPv4 address): ADD, CHECK, DEL. backend is set to
#                     iptables: an absent one would reach the machine's
#                     firewalld over D-Bus when it runs, outside the namespaces
#   firewall-nftables the same on nftables (table inet cni_firewall)
#
# Each scenario runs one untimed warm-up attachment (it creates the bridge,
# the nat chains), then N timed ADD/CHECK/DEL cycles on one container
# namespace, and prints min/median/p90/max per operation in milliseconds.
# Timing uses bash's $EPOCHREALTIME around each exec, inside the stand-in
# host namespace, so `ip netns exec` costs are not counted.
#
# For scale (issue 4): the upstream suite takes 70-150 ms for a
# bridge+host-local ADD with ipMasq on this machine, and its DEL as much;
# upstream ptp sits ~1.8 s in IPv6 DAD per dual-stack ADD. Upstream macvlan +
# host-local takes about 15 ms for an ADD and 25 ms for a DEL (issue 9).
set -euo pipefail
export LC_ALL=C # $EPOCHREALTIME with a "." decimal separator

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${CNIFORGE_BIN:-$repo/bin}
n=50
binb=

usage() { sed -n '2,/^[^#]/p' "$0" | sed -n 's/^# \{0,1\}//p'; }

# --- inner part: runs inside the stand-in host namespace -------------------
if [ "${BENCH_INNER:-}" = 1 ]; then
	scenario=$1 n=$2 contns=$3 datadir=$4 out=$5 binb=${6:-}

	case $scenario in
	loopback)
		plugin=loopback
		conf='{"cniVersion":"1.0.0","name":"bench-lo","type":"loopback"}'
		;;
	bridge-iptables | bridge-nftables)
		plugin=bridge
		conf=$(jq -cn --arg be "${scenario#bridge-}" --arg dd "$datadir" '{
			cniVersion: "1.0.0", name: ("bench-" + $be), type: "bridge",
			bridge: "benchbr0", isGateway: true, ipMasq: true, ipMasqBackend: $be,
			ipam: {type: "host-local", dataDir: $dd, ranges: [[{subnet: "10.250.1.0/24"}]]}}')
		;;
	ptp-dual | ptp-dual-masq)
		plugin=ptp
		masq=false
		[ "$scenario" = ptp-dual-masq ] && masq=true
		conf=$(jq -cn --argjson masq "$masq" --arg dd "$datadir" '{
			cniVersion: "1.0.0", name: "bench-ptp", type: "ptp", ipMasq: $masq,
			ipam: {type: "host-local", dataDir: $dd,
				ranges: [[{subnet: "10.250.2.0/24"}], [{subnet: "fd00:250:2::/64"}]]}}')
		;;
	chain)
		plugin=chain
		conf=$(jq -cn --arg dd "$datadir" '{
			cniVersion: "1.0.0", name: "bench-chain", type: "bridge",
			bridge: "benchbr1", isGateway: true, ipMasq: true,
			ipam: {type: "host-local", dataDir: $dd, ranges: [[{subnet: "10.250.3.0/24"}]]}}')
		bwconf=$(jq -cn '{cniVersion: "1.0.0", name: "bench-chain", type: "bandwidth",
			runtimeConfig: {bandwidth: {ingressRate: 100000000, ingressBurst: 1000000, egressRate: 100000000, egressBurst: 1000000}}}')
		tuneconf=$(jq -cn --arg dd "$datadir/tuning" '{cniVersion: "1.0.0", name: "bench-chain", type: "tuning",
			dataDir: $dd, mtu: 1400, txQLen: 500, sysctl: {"net.ipv4.conf.IFNAME.arp_filter": "1"}}')
		pmchainconf=$(jq -cn '{cniVersion: "1.0.0", name: "bench-chain", type: "portmap", snat: true,
			runtimeConfig: {portMappings: [{hostPort: 18080, containerPort: 80, protocol: "tcp"}]}}')
		fwconf=$(jq -cn '{cniVersion: "1.0.0", name: "bench-chain", type: "firewall", backend: "iptables"}')
		;;
	macvlan)
		plugin=macvlan
		conf=$(jq -cn --arg dd "$datadir" '{
			cniVersion: "1.0.0", name: "bench-macvlan", type: "macvlan", master: "uplink0",
			ipam: {type: "host-local", dataDir: $dd,
				ranges: [[{subnet: "10.249.0.0/24", rangeStart: "10.249.0.100", rangeEnd: "10.249.0.200"}]]}}')
		;;
	firewall-iptables | firewall-nftables)
		plugin=firewall
		conf=$(jq -cn --arg be "${scenario#firewall-}" '{
			cniVersion: "1.0.0", name: "bench-fw", type: "firewall", backend: $be,
			prevResult: {cniVersion: "1.0.0",
				interfaces: [{name: "benchbr0"}, {name: "eth0", sandbox: "/x"}],
				ips: [{address: "10.250.3.2/24", interface: 1}]}}')
		;;
	portmap-*)
		plugin=portmap
		be=iptables
		case $scenario in portmap-nft-*) be=nftables ;; esac
		count=1
		[ "${scenario##*-}" = many ] && count=1000
		prev='{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"x"}],"ips":[{"address":"10.250.3.2/24","interface":0}]}'
		# protocol spelled out: upstream 1.1.1 (Debian's, for -c) has no
		# default and writes "-p  --dport" without it.
		pmconf() { # pmconf COUNT FIRSTPORT [PREVRESULT]
			jq -cn --arg be "$be" --argjson prev "${3:-$prev}" --argjson n "$1" --argjson p "$2" '{
				cniVersion: "1.0.0", name: "bench-portmap", type: "portmap", backend: $be,
				prevResult: $prev,
				runtimeConfig: {portMappings: [range(0; $n) | {hostPort: ($p + .), containerPort: 80, protocol: "tcp"}]}}'
		}
		conf=$(pmconf "$count" 20000)
		;;
	*)
		echo "unknown scenario $scenario" >&2
		exit 2
		;;
	esac

	export CNI_PATH CNI_NETNS=/run/netns/$contns CNI_IFNAME=eth0 CNI_CONTAINERID
	ibin=$bin

	# invoke CMD STDIN [PLUGIN]: runs the plugin, leaves its stdout in
	# $result and its duration (ms) in $ms; a failure stops the benchmark,
	# except a CHECK of the compared suite (-c), which returns 1 untimed:
	# upstream 1.1.1's portmap CHECK fails on an IPv4-only attachment
	# ("could not check ipv6 dnat"), a bug of its own.
	invoke() {
		local t0 t1 rc=0 p=${3:-$plugin}
		t0=$EPOCHREALTIME
		result=$(CNI_COMMAND=$1 CNI_PATH=$ibin "$ibin/$p" <<<"$2" 2>"$datadir/stderr") || rc=$?
		t1=$EPOCHREALTIME
		if [ "$rc" != 0 ] && [ "$1" = CHECK ] && [ -n "$binb" ] && [ "$ibin" = "$binb" ]; then
			if [ ! -e "$datadir/check-failed-$p" ]; then
				echo "$scenario@B: $p CHECK failed, not timed: $(jq -r .msg <<<"$result" 2>/dev/null || echo "$result")" >&2
				: >"$datadir/check-failed-$p"
			fi
			return 1
		fi
		if [ "$rc" != 0 ]; then
			echo "$scenario: $1 failed (exit $rc): $result" >&2
			cat "$datadir/stderr" >&2
			exit 1
		fi
		ms=$(((${t1/./} - ${t0/./}) / 10))
		ms="$((ms / 100)).$(printf '%02d' $((ms % 100)))"
	}

	cycle() { # cycle RECORD [LABEL DIR]: one ADD, CHECK, DEL
		local label=${2:-}
		ibin=${3:-$bin}
		CNI_CONTAINERID=bench-$RANDOM$RANDOM
		invoke ADD "$conf"
		[ "$1" = 1 ] && echo "$label ADD $ms" >>"$out"
		local check_conf
		check_conf=$(jq -c --argjson prev "$result" '. + {prevResult: $prev}' <<<"$conf")
		if invoke CHECK "$check_conf"; then
			[ "$1" = 1 ] && echo "$label CHECK $ms" >>"$out"
		fi
		invoke DEL "$conf"
		[ "$1" = 1 ] && echo "$label DEL $ms" >>"$out"
		return 0
	}

	if [ "${scenario##*-}" = others ]; then
		# Another container's 1000 mappings stay on the node throughout.
		CNI_CONTAINERID=bench-others
		invoke ADD "$(pmconf 1000 30000 "${prev/10.250.3.2/10.250.3.3}")"
	fi

	# ms_add A B: A + B, both "ms.cc"
	ms_add() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a + b }'; }
	with_prev() { jq -c --argjson prev "$2" '. + {prevResult: $prev}' <<<"$1"; }

	chain_cycle() { # chain_cycle RECORD [LABEL DIR]: ADD, CHECK, DEL of the list
		local label=${2:-} checked=1
		ibin=${3:-$bin}
		CNI_CONTAINERID=bench-$RANDOM$RANDOM
		local total=0 prev final i
		local names=(bridge portmap bandwidth tuning firewall) confs=("$conf" "$pmchainconf" "$bwconf" "$tuneconf" "$fwconf")
		prev=
		for i in 0 1 2 3 4; do
			local c=${confs[$i]}
			[ -n "$prev" ] && c=$(with_prev "$c" "$prev")
			invoke ADD "$c" "${names[$i]}"
			prev=$result
			[ "$1" = 1 ] && echo "$label ADD:${names[$i]} $ms" >>"$out"
			total=$(ms_add "$total" "$ms")
		done
		final=$prev
		[ "$1" = 1 ] && echo "$label ADD $total" >>"$out"
		total=0
		for i in 0 1 2 3 4; do
			if invoke CHECK "$(with_prev "${confs[$i]}" "$final")" "${names[$i]}"; then
				[ "$1" = 1 ] && echo "$label CHECK:${names[$i]} $ms" >>"$out"
				total=$(ms_add "$total" "$ms")
			else
				checked=0
			fi
		done
		# A list whose CHECK failed somewhere has no total.
		[ "$1" = 1 ] && [ "$checked" = 1 ] && echo "$label CHECK $total" >>"$out"
		total=0
		for i in 4 3 2 1 0; do
			invoke DEL "$(with_prev "${confs[$i]}" "$final")" "${names[$i]}"
			[ "$1" = 1 ] && echo "$label DEL:${names[$i]} $ms" >>"$out"
			total=$(ms_add "$total" "$ms")
		done
		[ "$1" = 1 ] && echo "$label DEL $total" >>"$out"
		return 0
	}
	run=cycle
	[ "$scenario" = chain ] && run=chain_cycle
	if [ -z "$binb" ]; then
		$run 0 # warm-up: creates the bridge, loads nat tables, fills caches
		for ((i = 0; i < n; i++)); do
			$run 1
		done
		exit 0
	fi
	$run 0 @A "$bin"
	$run 0 @B "$binb"
	for ((i = 0; i < n; i++)); do
		if ((i % 2)); then
			$run 1 @B "$binb"
			$run 1 @A "$bin"
		else
			$run 1 @A "$bin"
			$run 1 @B "$binb"
		fi
	done
	exit 0
fi

# --- outer part: namespaces, cleanup, report ------------------------------
all=(loopback bridge-iptables bridge-nftables ptp-dual ptp-dual-masq macvlan firewall-iptables firewall-nftables portmap-ipt-one portmap-ipt-many portmap-ipt-others portmap-nft-one portmap-nft-many portmap-nft-others chain)
scenarios=()
while [ $# -gt 0 ]; do
	case $1 in
	-n)
		n=$2
		shift 2
		;;
	-c)
		binb=$(cd "$2" && pwd)
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		scenarios+=("$1")
		shift
		;;
	esac
done

if [ "$(id -u)" != 0 ]; then
	echo "bench.sh needs root (network namespaces)" >&2
	exit 1
fi
for tool in ip jq; do
	command -v "$tool" >/dev/null || {
		echo "bench.sh needs $tool" >&2
		exit 1
	}
done
if [ ${#scenarios[@]} = 0 ]; then
	for s in "${all[@]}"; do
		need=("${s%%-*}")
		[ "$s" = chain ] && need=(bridge portmap bandwidth tuning firewall)
		ok=1
		for p in "${need[@]}" host-local; do [ -x "$bin/$p" ] || ok=0; done
		if [ "$ok" = 1 ]; then
			scenarios+=("$s")
		else
			echo "skipping $s: one of ${need[*]} host-local is not built in $bin (./build_linux.sh)" >&2
		fi
	done
fi

tag=$$
hostns=bench-host-$tag
contns=bench-cont-$tag
upns=bench-up-$tag
work=$(mktemp -d /tmp/cniforge-bench.XXXXXX)

cleanup() {
	for ns in "$contns" "$hostns" "$upns"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A stand-in host that looks like one: an uplink with an address and a
# default route (masquerade has somewhere to go), forwarding off until a
# plugin turns it on.
ip netns add "$hostns"
ip netns add "$upns"
ip -n "$hostns" link set lo up
ip -n "$upns" link set lo up
ip -n "$hostns" link add uplink0 type veth peer name eth0 netns "$upns"
ip -n "$hostns" addr add 10.249.0.2/24 dev uplink0
ip -n "$hostns" link set uplink0 up
ip -n "$upns" addr add 10.249.0.1/24 dev eth0
ip -n "$upns" link set eth0 up
ip -n "$hostns" route add default via 10.249.0.1

printf 'cniforge plugins from %s, %d iterations each, on %s (%s CPUs)\n' "$bin" "$n" "$(uname -r)" "$(nproc)"
[ -n "$binb" ] && printf 'compared (@B) with %s, interleaved with them (@A)\n' "$binb"
echo
printf '%-18s %-15s %8s %8s %8s %8s\n' scenario op min median p90 max
for s in "${scenarios[@]}"; do
	ip netns add "$contns"
	ip -n "$contns" link set lo up
	mkdir -p "$work/$s"
	: >"$work/$s.times"
	BENCH_INNER=1 CNIFORGE_BIN=$bin ip netns exec "$hostns" \
		"$0" "$s" "$n" "$contns" "$work/$s" "$work/$s.times" "$binb"
	ip netns del "$contns"
	labels=("")
	[ -n "$binb" ] && labels=(@A @B)
	ops=(ADD CHECK DEL)
	[ "$s" = chain ] && ops=(ADD ADD:bridge ADD:portmap ADD:bandwidth ADD:tuning ADD:firewall
		CHECK CHECK:bridge CHECK:portmap CHECK:bandwidth CHECK:tuning CHECK:firewall
		DEL DEL:firewall DEL:tuning DEL:bandwidth DEL:portmap DEL:bridge)
	for label in "${labels[@]}"; do
		for op in "${ops[@]}"; do
			# Without -c the lines read " ADD 12.3" (an empty label).
			awk -v l="$label" -v op="$op" '(l == "" && NF == 2 && $1 == op) || ($1 == l && $2 == op) { print $NF }' \
				"$work/$s.times" | sort -n | awk -v s="$s$label" -v op="$op" '
				{ v[NR] = $1 }
				END {
					if (NR == 0) exit
					med = v[int((NR + 1) / 2)]
					p90 = v[int(NR * 0.9 + 0.999999)]
					printf "%-18s %-15s %8.2f %8.2f %8.2f %8.2f\n", s, op, v[1], med, p90, v[NR]
				}' | tee -a "$work/rows"
		done
	done
	if [ -n "$binb" ]; then
		for op in ADD CHECK DEL; do
			awk -v a="$s@A" -v b="$s@B" -v op="$op" '$2 == op && $1 == a { ma = $4 } $2 == op && $1 == b { mb = $4 }
				END {
					if (ma > 0 && mb > 0) printf "%-18s %-6s B/A median %.2f\n", substr(a, 1, length(a) - 2), op, mb / ma
					else if (ma > 0) printf "%-18s %-6s B/A median n/a (a CHECK of B failed)\n", substr(a, 1, length(a) - 2), op
				}' "$work/rows"
		done
	fi
done
printf '\n(milliseconds per plugin exec, IPAM delegation included)\n'
