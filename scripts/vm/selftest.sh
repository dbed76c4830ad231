#!/usr/bin/env bash
# selftest.sh — checks scripts/vmtest.sh itself (about a minute and a half;
# boots six guests): exit code and output pass-through, working directory and
# environment, 124 on timeout, 125 on a guest panic, and no qemu left behind
# when vmtest.sh is killed with SIGKILL. Needs root.
set -uo pipefail
vmtest=$(cd "$(dirname "$0")/.." && pwd)/vmtest.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() { # check NAME WANT GOT
	if [ "$2" = "$3" ]; then
		echo "ok   $1"
	else
		echo "FAIL $1: want $(printf %q "$2"), got $(printf %q "$3")"
		failures=$((failures + 1))
	fi
}

"$vmtest" sh -c 'echo out; echo err >&2; exit 7' >"$tmp/out" 2>"$tmp/err"
check "exit code passes through" 7 $?
check "stdout comes back on stdout" out "$(cat "$tmp/out")"
check "stderr comes back on stderr" err "$(grep -v '^vmtest:' "$tmp/err")"

got=$(CNIFORGE_VM_TIMEOUT=120 "$vmtest" seq 1 1000000 | head -n 1; echo "${PIPESTATUS[0]}")
check "a caller that stops reading does not stall the guest" "1 0" "$(echo $got)"

mkdir "$tmp/work dir"
got=$(cd "$tmp/work dir" && FOO='a b$c' "$vmtest" bash -c 'echo "$PWD|$FOO|$(id -u)|$(uname -r)"')
check "runs as root in the caller's directory and environment, under Debian's 6.1" \
	"$tmp/work dir|a b\$c|0|6.1.0" "${got%-*-amd64}"

CNIFORGE_VM_TIMEOUT=8 "$vmtest" sleep 600 2>/dev/null
check "a guest past its timeout exits 124" 124 $?

"$vmtest" sh -c 'echo c >/proc/sysrq-trigger' >/dev/null 2>"$tmp/panic"
check "a guest that never reports (panic) exits 125" 125 $?
check "the console tail is shown" 1 "$(grep -c 'Kernel panic' "$tmp/panic")"

"$vmtest" sleep 600 &
v=$!
q=
for _ in $(seq 100); do
	q=$(pgrep -P "$v" -f qemu-system-x86_64) && break
	sleep 0.1
done
check "vmtest.sh started qemu" yes "$([ -n "${q:-}" ] && echo yes || echo no)"
kill -KILL "$v"
wait "$v" 2>/dev/null
alive=yes
for _ in $(seq 50); do
	state=$(awk '{print $3}' "/proc/${q:-none}/stat" 2>/dev/null || echo gone)
	if [ "$state" = gone ] || [ "$state" = Z ]; then
		alive=no
		break
	fi
	sleep 0.1
done
check "qemu dies with a SIGKILLed vmtest.sh" no "$alive"

if [ $failures -gt 0 ]; then
	echo "selftest: $failures check(s) failed"
	exit 1
fi
echo "selftest: vmtest.sh behaves"
