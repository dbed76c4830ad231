#!/usr/bin/env bash
# Parallel pod throughput (issue 14): many pods attached to one network at
# once through libcni, as a runtime on a busy node does, then detached; it
# prints pods/s for ADD and for DEL (pods over the wall time of the phase;
# making the namespaces is not counted). Everything runs in network
# namespaces it makes and removes (cniforge-test-*, a stand-in host and one
# per pod); the machine's own namespace is never touched.
#
#   scripts/parallel-bench.sh [-n ROUNDS] [-p PODS] [-v CNIVERSION] [DIR...]   (root; run ./build_linux.sh first)
#
# Scenarios, each on iptables and on nftables (ipMasqBackend, portmap's
# backend; firewall stays on iptables):
#   bridge  8 workers, bridge with ipMasq + host-local alone (the issue's
#           reference: upstream does about 44 ADD and 20 DEL pods/s here)
#   chain   16 workers, bridge (ipMasq) → portmap (one host port per pod)
#           → firewall
# DIR is a folder of plugins: bin/ ($CNIFORGE_BIN) by default, or the
# multicall binary installed by `bin/cniforge install --dir DIR`. With
# several DIRs each round runs each of them back to back, so they see the
# same machine load: compare them that way, e.g.
#   bin/cniforge install --dir /tmp/multi && scripts/parallel-bench.sh bin /tmp/multi
# -v sets the conflist's cniVersion (default 1.1.0); an upstream release
# older than 1.3 refuses 1.1.0, so compare with it at -v 1.0.0:
#   scripts/parallel-bench.sh -v 1.0.0 /tmp/multi /usr/lib/cni
# Each row gives the median and every round's figure, and the CPU time
# (user + system, ms) the plugin processes used per pod, which varies far
# less than pods/s on a machine other work keeps busy. Default: 64 pods,
# 3 rounds, after one warm-up round (the bridge, the base chains).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rounds=3 pods=64 cniversion=1.1.0
while getopts n:p:v:h opt; do
	case $opt in
	n) rounds=$OPTARG ;;
	p) pods=$OPTARG ;;
	v) cniversion=$OPTARG ;;
	*)
		sed -n '2,/^[^#]/p' "$0" | sed -n 's/^# \{0,1\}//p'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- "${CNIFORGE_BIN:-$repo/bin}"
if [ "$(id -u)" != 0 ]; then
	echo "parallel-bench.sh makes network namespaces and needs root" >&2
	exit 1
fi
for d in "$@"; do
	for p in bridge host-local portmap firewall; do
		[ -x "$d/$p" ] || {
			echo "parallel-bench.sh: no $p in $d (run ./build_linux.sh)" >&2
			exit 1
		}
	done
done

work=$(mktemp -d /tmp/cniforge-parallel-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$repo" && GOFLAGS=-buildvcs=false go build -o "$work/parallelbench" ./scripts/parallelbench)

first=true
for scenario in "bridge 8" "chain 16"; do
	read -r name workers <<<"$scenario"
	chain=false
	[ "$name" = chain ] && chain=true
	for backend in iptables nftables; do
		"$work/parallelbench" -pods "$pods" -workers "$workers" -rounds "$rounds" \
			-chain="$chain" -backend "$backend" -cniversion "$cniversion" -label "$name" "$@" >"$work/out"
		if $first; then
			head -1 "$work/out"
			first=false
		fi
		tail -n +2 "$work/out"
	done
done
