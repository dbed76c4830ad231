#!/usr/bin/env bash
# Runs the Go native fuzz targets (every func FuzzXxx(f *testing.F) under
# pkg/ and plugins/), each with -fuzz for DURATION, one after the other,
# and prints per target the executions reached, the new inputs found and
# any finding (a panic, a hang, an error that is not a CNI error with a
# code). Their seed corpora (testdata/fuzz/) already run in plain `go test`.
#
#   scripts/fuzz.sh [-t DURATION] [-l] [TARGET...]
#
# -t  how long to fuzz each target (go's -fuzztime: 2s, 5m, or 10000x for
#     a count of executions); default 2s, so that all targets take about two
#     minutes with a warm build cache. The long campaign:
#       nice -n 10 scripts/fuzz.sh -t 5m
# -l  list the targets and their packages, and exit.
# TARGET: target names (FuzzBridgeConfig ...); default all.
#
# A finding is written by go to <package>/testdata/fuzz/<target>/<hash>:
# fix the fault, keep that file as a regression seed, and commit both.
# Exits non-zero when any target found something or failed to run. New
# interesting inputs (not findings) stay in go's cache ($GOCACHE/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

dur=2s
list=0
while getopts "t:l" opt; do
	case $opt in
	t) dur=$OPTARG ;;
	l) list=1 ;;
	*)
		sed -n '8,14p' "$0" >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"

# "<target> <package dir>" for every fuzz target.
mapfile -t all < <(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' pkg plugins |
	sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\2 \1|' | sort)
if [ "$list" = 1 ]; then
	printf '%s\n' "${all[@]}"
	exit 0
fi

targets=()
if [ $# = 0 ]; then
	targets=("${all[@]}")
else
	for want in "$@"; do
		found=
		for t in "${all[@]}"; do
			[ "${t%% *}" = "$want" ] && found=$t
		done
		if [ -z "$found" ]; then
			echo "fuzz.sh: no fuzz target $want (scripts/fuzz.sh -l lists them)" >&2
			exit 2
		fi
		targets+=("$found")
	done
fi

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
failed=0
total_execs=0
printf '%-24s %-28s %12s %8s  %s\n' target package execs new result
for t in "${targets[@]}"; do
	name=${t%% *} dir=${t#* }
	out="$log/$name"
	rc=0
	go test -run '^$' -fuzz "^$name\$" -fuzztime "$dur" "./$dir" >"$out" 2>&1 || rc=$?
	# go's fuzzing engine fails with a bare "context deadline exceeded"
	# (no input written) when -fuzztime runs out while a slow target is
	# still measuring its seed corpus' coverage: not a finding. Once, with
	# a longer time; a second time it counts.
	if [ "$rc" != 0 ] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
		echo "$name: go's fuzz engine ran out of time before fuzzing (context deadline exceeded); again with -fuzztime 10s" >&2
		rc=0
		go test -run '^$' -fuzz "^$name\$" -fuzztime 10s "./$dir" >"$out" 2>&1 || rc=$?
	fi
	# go prints "fuzz: elapsed: 2s, execs: 12345 (6172/sec), new interesting: 3 (total: 40)".
	last=$(grep -E '^fuzz: elapsed: .*execs: [0-9]+' "$out" | tail -1 || true)
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
	new=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
	total_execs=$((total_execs + ${execs:-0}))
	if [ "$rc" = 0 ] && grep -q '^PASS$\|^ok ' "$out"; then
		printf '%-24s %-28s %12s %8s  %s\n' "$name" "$dir" "${execs:-?}" "${new:-?}" ok
		continue
	fi
	failed=$((failed + 1))
	input=$(sed -nE 's/.*Failing input written to (.*)/\1/p' "$out" | head -1)
	printf '%-24s %-28s %12s %8s  %s\n' "$name" "$dir" "${execs:-?}" "${new:-?}" "FINDING${input:+: $dir/$input}"
	# The failure without go's progress lines, capped: enough to see the fault.
	grep -vE '^fuzz: (elapsed|minimizing)' "$out" | head -40 | sed 's/^/    /'
done
echo "fuzz: ${#targets[@]} targets, $total_execs executions in all, $failed with findings (-fuzztime $dur each)"
[ "$failed" = 0 ]
