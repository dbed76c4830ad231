#!/usr/bin/env bash
# Benchmarks the built plugins (bin/, or $CNIFORGE_BIN) the way a runtime
# drives them: one exec per operation, config on stdin. Everything runs in
# network namespaces this script creates and removes (a stand-in host and a
# container, "bench-*-<pid>"); the machine's own namespace is never touched.
#
#   scripts/bench.sh [-n N] [scenario...]     (root; run ./build_linux.sh first)
#
# Scenarios (default: all whose plugins are built):
#   bridge-iptables   bridge + host-local, ipMasq on iptables: ADD, CHECK, DEL
#   bridge-nftables   bridge + host-local, ipMasq on nftables: ADD, CHECK, DEL
#   ptp-dual          ptp + host-local, IPv4 + IPv6:            ADD, CHECK, DEL
#   ptp-dual-masq     the same with ipMasq (default backend)
#   portmap-ipt-one   portmap (chained, synthetic prevResult), 1 mapping, iptables
#   portmap-ipt-many  the same with 1000 mappings (Podman's -p 20000-20999)
#   portmap-ipt-others 1 mapping, with another container's 1000 mappings on the node
#   portmap-nft-one, portmap-nft-many, portmap-nft-others: the same on nftables
#
# Each scenario runs one untimed warm-up attachment (it creates the bridge,
# the nat chains), then N timed ADD/CHECK/DEL cycles on one container
# namespace, and prints min/median/p90/max per operation in milliseconds.
# Timing uses bash's $EPOCHREALTIME around each exec, inside the stand-in
# host namespace, so `ip netns exec` costs are not counted.
#
# For scale (issue 4): the upstream suite takes 70-150 ms for a
# bridge+host-local ADD with ipMasq on this machine, and its DEL as much;
# upstream ptp sits ~1.8 s in IPv6 DAD per dual-stack ADD.
set -euo pipefail
export LC_ALL=C # $EPOCHREALTIME with a "." decimal separator

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${CNIFORGE_BIN:-$repo/bin}
n=50

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

# --- inner part: runs inside the stand-in host namespace -------------------
if [ "${BENCH_INNER:-}" = 1 ]; then
	scenario=$1 n=$2 contns=$3 datadir=$4 out=$5

	case $scenario in
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
	portmap-*)
		plugin=portmap
		be=iptables
		case $scenario in portmap-nft-*) be=nftables ;; esac
		count=1
		[ "${scenario##*-}" = many ] && count=1000
		prev='{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"x"}],"ips":[{"address":"10.250.3.2/24","interface":0}]}'
		pmconf() { # pmconf COUNT FIRSTPORT [PREVRESULT]
			jq -cn --arg be "$be" --argjson prev "${3:-$prev}" --argjson n "$1" --argjson p "$2" '{
				cniVersion: "1.0.0", name: "bench-portmap", type: "portmap", backend: $be,
				prevResult: $prev,
				runtimeConfig: {portMappings: [range(0; $n) | {hostPort: ($p + .), containerPort: 80}]}}'
		}
		conf=$(pmconf "$count" 20000)
		;;
	*)
		echo "unknown scenario $scenario" >&2
		exit 2
		;;
	esac

	export CNI_PATH=$bin CNI_NETNS=/run/netns/$contns CNI_IFNAME=eth0 CNI_CONTAINERID

	# invoke CMD STDIN: runs the plugin, leaves its stdout in $result and
	# its duration (ms) in $ms; a failure stops the benchmark.
	invoke() {
		local t0 t1 rc=0
		t0=$EPOCHREALTIME
		result=$(CNI_COMMAND=$1 "$bin/$plugin" <<<"$2" 2>"$datadir/stderr") || rc=$?
		t1=$EPOCHREALTIME
		if [ "$rc" != 0 ]; then
			echo "$scenario: $1 failed (exit $rc): $result" >&2
			cat "$datadir/stderr" >&2
			exit 1
		fi
		ms=$(((${t1/./} - ${t0/./}) / 10))
		ms="$((ms / 100)).$(printf '%02d' $((ms % 100)))"
	}

	cycle() { # cycle RECORD
		CNI_CONTAINERID=bench-$RANDOM$RANDOM
		invoke ADD "$conf"
		[ "$1" = 1 ] && echo "ADD $ms" >>"$out"
		local check_conf
		check_conf=$(jq -c --argjson prev "$result" '. + {prevResult: $prev}' <<<"$conf")
		invoke CHECK "$check_conf"
		[ "$1" = 1 ] && echo "CHECK $ms" >>"$out"
		invoke DEL "$conf"
		[ "$1" = 1 ] && echo "DEL $ms" >>"$out"
		return 0
	}

	if [ "${scenario##*-}" = others ]; then
		# Another container's 1000 mappings stay on the node throughout.
		CNI_CONTAINERID=bench-others
		invoke ADD "$(pmconf 1000 30000 "${prev/10.250.3.2/10.250.3.3}")"
	fi
	cycle 0 # warm-up: creates the bridge, loads nat tables, fills caches
	for ((i = 0; i < n; i++)); do
		cycle 1
	done
	exit 0
fi

# --- outer part: namespaces, cleanup, report ------------------------------
all=(bridge-iptables bridge-nftables ptp-dual ptp-dual-masq
	portmap-ipt-one portmap-ipt-many portmap-ipt-others portmap-nft-one portmap-nft-many portmap-nft-others)
scenarios=()
while [ $# -gt 0 ]; do
	case $1 in
	-n)
		n=$2
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
		if [ -x "$bin/${s%%-*}" ] && [ -x "$bin/host-local" ]; then
			scenarios+=("$s")
		else
			echo "skipping $s: $bin/${s%%-*} or $bin/host-local not built (./build_linux.sh)" >&2
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

printf 'cniforge plugins from %s, %d iterations each, on %s (%s CPUs)\n\n' "$bin" "$n" "$(uname -r)" "$(nproc)"
printf '%-18s %-6s %8s %8s %8s %8s\n' scenario op min median p90 max
for s in "${scenarios[@]}"; do
	ip netns add "$contns"
	ip -n "$contns" link set lo up
	mkdir -p "$work/$s"
	: >"$work/$s.times"
	BENCH_INNER=1 CNIFORGE_BIN=$bin ip netns exec "$hostns" \
		"$0" "$s" "$n" "$contns" "$work/$s" "$work/$s.times"
	ip netns del "$contns"
	for op in ADD CHECK DEL; do
		awk -v op="$op" '$1 == op { print $2 }' "$work/$s.times" | sort -n | awk -v s="$s" -v op="$op" '
			{ v[NR] = $1 }
			END {
				if (NR == 0) exit
				med = v[int((NR + 1) / 2)]
				p90 = v[int(NR * 0.9 + 0.999999)]
				printf "%-18s %-6s %8.2f %8.2f %8.2f %8.2f\n", s, op, v[1], med, p90, v[NR]
			}'
	done
done
printf '\n(milliseconds per plugin exec, IPAM delegation included)\n'
