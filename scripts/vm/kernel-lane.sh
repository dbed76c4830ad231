#!/usr/bin/env bash
# kernel-lane.sh — the VM lane of test_linux.sh: builds the test binaries of
# every package with kernel specs (Label("kernel"), see pkg/kernelfeature)
# and runs those specs in one qemu guest with Debian's kernel
# (scripts/vmtest.sh). Fails loudly when it cannot run: without the lane the
# ipvlan, vlan, dummy, vrf and bridge-VLAN code is untested.
#
#   CNIFORGE_SKIP_VM_LANE=1        skip the lane (a developer opt-out; loud)
#   CNIFORGE_VM_LANE_GUESTS=per-binary  one guest per test binary instead of
#                                  one for all (measured slower, see README)
#
# Extra arguments are passed to `go test -c` (e.g. -tags).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

banner() {
	local line='!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
	printf '%s\n' "$line" "$@" "$line" >&2
}

if [ "${CNIFORGE_SKIP_VM_LANE:-}" = 1 ]; then
	banner "!! VM LANE SKIPPED (CNIFORGE_SKIP_VM_LANE=1): the kernel specs (ipvlan," \
		"!! vlan, dummy, vrf, bridge VLANs) were NOT run. This run proves nothing" \
		"!! about them. Never set this in CI."
	exit 0
fi
if ! command -v qemu-system-x86_64 >/dev/null || ! command -v busybox >/dev/null; then
	banner "!! VM LANE CANNOT RUN: qemu-system-x86_64 or busybox is missing." \
		"!! The kernel specs (ipvlan, vlan, dummy, vrf, bridge VLANs) only run in" \
		"!! the lane. Install the packages: scripts/vm/install-deps.sh" \
		"!! (or, as a developer only, opt out with CNIFORGE_SKIP_VM_LANE=1)."
	exit 1
fi

# Packages with kernel specs: test files that use the label or the probes.
mapfile -t dirs < <(grep -rlE --include='*_test.go' 'Label\("kernel"\)|kernelfeature\.' \
	--exclude-dir=.git --exclude-dir=.cache --exclude-dir=bin . | xargs -r -n1 dirname | sort -u)
if [ ${#dirs[@]} -eq 0 ]; then
	banner "!! VM LANE: no package has kernel specs; pkg/kernelfeature's should be there."
	exit 1
fi

mkdir -p .cache/vm
out=$(mktemp -d "$repo/.cache/vm/lane.XXXXXX")
trap 'rm -rf "$out"' EXIT
start=$SECONDS
for d in "${dirs[@]}"; do
	d=${d#./}
	name=${d//\//_}.test
	go test -c -race "$@" -o "$out/$name" "./$d"
	echo "$repo/$d $name" >>"$out/list"
done
go build -o "$out/skipcheck" ./scripts/vm/skipcheck
built=$SECONDS
echo "== VM lane: built ${#dirs[@]} test binaries in $((built - start))s: ${dirs[*]}"

rc=0
if [ "${CNIFORGE_VM_LANE_GUESTS:-one}" = per-binary ]; then
	while read -r pkgdir name; do
		grep -F " $name" "$out/list" | grep -F "$pkgdir " >"$out/list.$name"
		mkdir -p "$out/$name.d"
		ln "$out/$name" "$out/skipcheck" "$out/$name.d/"
		mv "$out/list.$name" "$out/$name.d/list"
		scripts/vmtest.sh scripts/vm/run-kernel-specs.sh "$out/$name.d" || rc=$?
	done <"$out/list"
else
	scripts/vmtest.sh scripts/vm/run-kernel-specs.sh "$out" || rc=$?
fi
echo "== VM lane: guest time $((SECONDS - built))s, total $((SECONDS - start))s"
case $rc in
0) ;;
124) banner "!! VM LANE: the guest timed out (CNIFORGE_VM_TIMEOUT)." ;;
125) banner "!! VM LANE: the guest never reported (boot failure or panic; console above)." ;;
*) banner "!! VM LANE: kernel specs failed (exit $rc)." ;;
esac
exit $rc
