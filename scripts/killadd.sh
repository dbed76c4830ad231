#!/usr/bin/env bash
# The full count of tests/killadd (issue 14, kills mid-ADD): every
# state-changing plugin alone and the full chain bridge → portmap →
# bandwidth → tuning → firewall, on each netfilter backend, each ADD
# SIGKILLed (the plugin's whole process group) at a moment spread over its
# run, then the runtime's DEL through libcni, or the namespace removed and
# libcni's GC. Afterwards the stand-in host and the container must equal
# their baseline snapshot. test_linux.sh runs the same test at a lower
# count (20 DEL and 6 GC trials per scenario).
#
#   scripts/killadd.sh [-n DEL_TRIALS] [-g GC_TRIALS] [-j SHARDS] [-f REGEXP] [-o LOGDIR]
#                                    (root; run ./build_linux.sh first)
#
# Defaults: 200 DEL and 50 GC trials per scenario, the scenarios split over
# 3 test processes at once (they wait mostly on exec and the kernel); -f
# runs only the scenarios whose name matches (grep -E: 'bridge|^ptp/',
# names such as bridge/nftables, full chain/iptables, host-local, tuning);
# -o keeps each shard's full log in LOGDIR (with a progress line every 50
# trials).
# Kernel-only scenarios (ipvlan, vlan, dummy, vrf) skip on a host kernel
# without them; run them in the VM lane (scripts/vm/README.md), from the
# package's folder, with a guest timeout the full count fits in (about
# 21 min for the four here; the default is 20), with
#   go test -c -o /tmp/k.test ./tests/killadd && (cd tests/killadd &&
#   KILLADD_TRIALS=200 KILLADD_GC_TRIALS=50 CNIFORGE_VM_LANE=1 CNIFORGE_VM_TIMEOUT=3300 \
#   ../../scripts/vmtest.sh /tmp/k.test --ginkgo.label-filter=kernel)
# It prints one line per scenario and variant ("KILLADD <scenario> kill+DEL:
# N trials, L leaks ...") and every leak found, and exits non-zero on any.
# Everything happens in namespaces named cniforge-test-* that the test
# makes and removes; the machine's own namespace is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."

del=200 gc=50 shards=3 focus= logdir=
while getopts n:g:j:f:o: o; do
	case $o in
	n) del=$OPTARG ;;
	g) gc=$OPTARG ;;
	j) shards=$OPTARG ;;
	f) focus=$OPTARG ;;
	o) logdir=$OPTARG ;;
	*) sed -n '2,/^[^#]/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2 ;;
	esac
done
if [ "$(id -u)" != 0 ]; then
	echo "killadd.sh: the test makes network namespaces and needs root" >&2
	exit 1
fi
export CNIFORGE_BIN=${CNIFORGE_BIN:-$PWD/bin}
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"
if [ ! -x "$CNIFORGE_BIN/bridge" ]; then
	echo "killadd.sh: no plugins in $CNIFORGE_BIN: run ./build_linux.sh first" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=$work
if [ -n "$logdir" ]; then
	mkdir -p "$logdir"
	logs=$(cd "$logdir" && pwd)
fi
go test -c -o "$work/killadd.test" ./tests/killadd

# The scenarios, as the test names them; each shard takes every n-th.
mapfile -t names < <("$work/killadd.test" -ginkgo.dry-run -ginkgo.v 2>/dev/null |
	sed 's/\x1b\[[0-9;]*m//g' | sed -n 's/.* DEL or GC \(.*\) leaves nothing of the attachment.*/\1/p' |
	sort -u | grep -E -- "${focus:-.}")
if [ ${#names[@]} -eq 0 ]; then
	echo "killadd.sh: no scenario matches ${focus:-anything}" >&2
	exit 1
fi
echo "== killadd: ${#names[@]} scenarios, $del DEL and $gc GC trials each, $shards at once"
start=$SECONDS
pids=()
for ((s = 0; s < shards; s++)); do
	re=
	for ((i = s; i < ${#names[@]}; i += shards)); do
		re+="${re:+|}$(printf '%s' "${names[i]}" | sed 's/[][\\.*^$()+?{}|/]/\\&/g') leaves"
	done
	[ -n "$re" ] || continue
	(cd tests/killadd && KILLADD_TRIALS=$del KILLADD_GC_TRIALS=$gc \
		"$work/killadd.test" -test.v -test.timeout 10h -ginkgo.focus="$re" >"$logs/shard$s.log" 2>&1) &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
	wait "$p" || rc=1
done
# The leaks (the test prints each on stdout, then its indented details).
cat "$logs"/shard*.log | sed 's/\x1b\[[0-9;]*m//g' | awk '/^LEAK / {p = 1; print; next} p && /^  / {print; next} {p = 0}'
grep -h '^KILLADD ' "$logs"/shard*.log | sort
for f in "$logs"/shard*.log; do
	grep -q -- '^--- PASS' "$f" || { echo "killadd.sh: a shard failed:"; sed 's/\x1b\[[0-9;]*m//g' "$f" | grep -E 'FAIL|panic|Expected' | head -20; }
done
echo "== killadd: $((SECONDS - start))s, exit $rc"
exit $rc
