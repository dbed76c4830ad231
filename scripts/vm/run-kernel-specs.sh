#!/usr/bin/env bash
# run-kernel-specs.sh DIR — runs inside the VM lane guest (kernel-lane.sh
# starts it through scripts/vmtest.sh). DIR holds the test binaries built on
# the host, DIR/list ("<package dir> <binary name>" per line) and skipcheck.
# Runs every binary's specs labelled "kernel" in its package directory (as
# `go test` would) and fails unless each of them ran and passed.
set -uo pipefail

dir=$1
export CNIFORGE_VM_LANE=1
reports=$(mktemp -d)
failed=()
while read -r pkgdir name; do
	echo "== VM lane: $name ($(uname -r))"
	rc=0
	(cd "$pkgdir" && "$dir/$name" -test.timeout=15m \
		--ginkgo.label-filter=kernel --ginkgo.fail-on-empty --ginkgo.silence-skips --ginkgo.no-color \
		--ginkgo.json-report="$reports/$name.json") || rc=$?
	if [ $rc -ne 0 ]; then
		failed+=("$name (exit $rc)")
	elif ! "$dir/skipcheck" "$reports/$name.json"; then
		failed+=("$name (a kernel spec did not run)")
	fi
done <"$dir/list"

if [ ${#failed[@]} -gt 0 ]; then
	echo "== VM lane FAILED: ${failed[*]}" >&2
	exit 1
fi
echo "== VM lane: every kernel spec passed"
