#!/usr/bin/env bash
# frontdoor.sh — runs every command the README tells a newcomer to run, so
# none of them can rot unseen (test_linux.sh calls it after the Go tests):
#
#   demo      ./build_linux.sh && sudo scripts/demo.sh
#   install   sudo install -D -m 0755 -t /opt/cni/bin bin/*   (into a temporary
#             folder instead of /opt/cni/bin; every binary must then run and
#             print its about text)
#   bench     sudo scripts/bench.sh, in a short mode (-n 2)
#   go bench  go test -bench . ./plugins/ipam/host-local/, one iteration each
#
# The demo and the bench must leave the real host as they found it: its links,
# addresses, routes, rules, netfilter rules, network namespaces and the files
# under /var/lib/cni and /run/cni are compared before and after each. The
# README's ```sh blocks are read too: a command there that this script does
# not know fails the run, so a new instruction cannot go untested.
#
# Closes with "frontdoor: N passed, N failed", which test_linux.sh adds to
# its total. Run as root from the repository: scripts/frontdoor.sh
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

if [ "$(id -u)" != 0 ]; then
	echo "frontdoor.sh runs the demo and needs root" >&2
	exit 1
fi

passed=0 failed=0
work=$(mktemp -d /tmp/cniforge-frontdoor.XXXXXX)
trap 'rm -rf "$work"' EXIT

ok() {
	passed=$((passed + 1))
	echo "frontdoor: ok: $*"
}
fail() {
	failed=$((failed + 1))
	echo "frontdoor: FAILED: $*" >&2
}

# The commands the README's ```sh blocks may hold, each exercised below.
known=(
	'./build_linux.sh && sudo scripts/demo.sh'
	'sudo ./test_linux.sh'
	'./build_linux.sh'
	'sudo install -D -m 0755 -t /opt/cni/bin bin/*'
)
readme_commands() {
	awk '/^```sh$/ {on = 1; next} /^```/ {on = 0} on && NF' README.md
}
unknown=()
while IFS= read -r line; do
	found=false
	for k in "${known[@]}"; do
		[ "$line" = "$k" ] && found=true
	done
	$found || unknown+=("$line")
done < <(readme_commands)
if [ ${#unknown[@]} -gt 0 ]; then
	fail "the README tells users to run commands frontdoor.sh does not exercise: $(printf '[%s] ' "${unknown[@]}")"
else
	ok "every command in the README's sh blocks is exercised here"
fi
for k in "${known[@]}"; do
	readme_commands | grep -qxF -- "$k" || fail "frontdoor.sh exercises [$k], which the README no longer says; update frontdoor.sh"
done

# snapshot FILE: what a plugin run must not change on the real host. Volatile
# parts (counters, timestamps, route expiry) are dropped.
snapshot() {
	{
		echo "## links"
		ip -br link show
		echo "## addresses"
		ip -br addr show
		echo "## routes"
		ip route show table all
		ip -6 route show table all | sed -E 's/ expires [0-9]+sec//'
		echo "## rules"
		ip rule show
		ip -6 rule show
		echo "## namespaces"
		# cniforge-test-* are made and removed by test processes (pkg/testutil),
		# never by the demo or the bench; another `go test` running meanwhile
		# must not count against them.
		ip netns list | grep -v '^cniforge-test-'
		echo "## iptables"
		local save
		for save in iptables-nft-save ip6tables-nft-save iptables-legacy-save ip6tables-legacy-save; do
			command -v "$save" >/dev/null || continue
			echo "# $save"
			"$save" 2>&1 | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]/[-]/'
		done
		echo "## nftables"
		nft list ruleset 2>&1 | sed -E 's/counter packets [0-9]+ bytes [0-9]+/counter/'
		echo "## files"
		local d
		for d in /var/lib/cni /run/cni; do
			[ -e "$d" ] && find "$d" -printf '%p %y %s\n' | sort
		done
	} >"$1" 2>&1
}

# host_untouched NAME COMMAND...: runs COMMAND (output to $work/NAME.log),
# requires exit 0 and the host snapshot unchanged.
host_untouched() {
	local name=$1
	shift
	snapshot "$work/$name.before"
	local rc=0
	"$@" >"$work/$name.log" 2>&1 || rc=$?
	snapshot "$work/$name.after"
	if [ "$rc" != 0 ]; then
		fail "$name exited $rc; its output:"
		sed 's/^/    /' "$work/$name.log" >&2
		return 1
	fi
	if ! diff -u "$work/$name.before" "$work/$name.after" >"$work/$name.diff"; then
		fail "$name changed the real host:"
		sed 's/^/    /' "$work/$name.diff" >&2
		return 1
	fi
	return 0
}

# --- the demo --------------------------------------------------------------
# `./build_linux.sh && sudo scripts/demo.sh`: as root already, so no sudo.
if host_untouched demo bash -c './build_linux.sh && scripts/demo.sh'; then
	# The demo's own promises, read from what it printed.
	if grep -q '^gc: ok$' "$work/demo.log" && grep -q '^== done' "$work/demo.log" &&
		grep -qE '^real host: ([0-9]+) links before the demo, \1 after$' "$work/demo.log"; then
		ok "demo: exit 0, GC reclaimed the leaked attachment, the host unchanged"
	else
		fail "demo exited 0 but did not reach its end (gc: ok, == done, link count); its output:"
		sed 's/^/    /' "$work/demo.log" >&2
	fi
fi

# --- install, into a temporary folder --------------------------------------
install_cmd=$(readme_commands | grep -m1 '^sudo install .* /opt/cni/bin ')
dest=$work/opt/cni/bin
if [ -z "$install_cmd" ]; then
	fail "the README has no 'sudo install ... /opt/cni/bin ...' command"
else
	# The README's own words, with the destination swapped and sudo dropped.
	cmd=${install_cmd#sudo }
	cmd=${cmd//\/opt\/cni\/bin/$dest}
	if ! (eval "$cmd") >"$work/install.log" 2>&1; then
		fail "install [$cmd]:"
		sed 's/^/    /' "$work/install.log" >&2
	else
		bad=()
		for b in bin/*; do
			name=$(basename "$b")
			if [ ! -x "$dest/$name" ] || ! cmp -s "$b" "$dest/$name"; then
				bad+=("$name: not installed")
				continue
			fi
			# Without CNI_COMMAND a plugin prints its about text on stderr.
			about=$(env -i "$dest/$name" 2>&1 </dev/null)
			case $about in
			"CNI $name plugin "*"(cniforge)"*"CNI protocol versions supported:"*) ;;
			*) bad+=("$name: about text [$about]") ;;
			esac
		done
		if [ ${#bad[@]} -eq 0 ] && [ -n "$(ls bin)" ]; then
			ok "install: $(ls bin | wc -l) binaries installed by the README's command, each runs"
		else
			fail "install: ${bad[*]:-nothing in bin/}"
		fi
	fi
fi

# --- the benchmarks, in a short mode ---------------------------------------
if host_untouched bench scripts/bench.sh -n 2; then
	rows=$(grep -cE '^[a-z-]+ +(ADD|CHECK|DEL) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' "$work/bench.log")
	if [ "$rows" -ge 30 ]; then
		ok "bench.sh -n 2: $rows rows, the host unchanged"
	else
		fail "bench.sh printed $rows timing rows, want 30 (10 scenarios x ADD, CHECK, DEL):"
		sed 's/^/    /' "$work/bench.log" >&2
	fi
fi
if go test -run '^$' -bench . -benchtime 1x ./plugins/ipam/host-local/ >"$work/gobench.log" 2>&1 &&
	grep -qE '^Benchmark.* ns/op' "$work/gobench.log"; then
	ok "go test -bench . ./plugins/ipam/host-local/ (one iteration each)"
else
	fail "host-local's Go benchmark:"
	sed 's/^/    /' "$work/gobench.log" >&2
fi

echo "frontdoor: $passed passed, $failed failed"
[ "$failed" = 0 ]
