#!/usr/bin/env bash
# frontdoor.sh — runs every command the README and docs/*.md tell a reader
# to run, so none of them can rot unseen (test_linux.sh calls it after the
# Go tests):
#
#   demo      ./build_linux.sh && sudo scripts/demo.sh
#   dhcp demo sudo scripts/dhcp-demo.sh (named in the README's prose)
#   install   sudo bin/cniforge install   (with --dir, into a temporary folder
#             instead of /opt/cni/bin; cniforge, its companions
#             (cniforge-light, cniforge-dhcp) and every plugin they hold must
#             then be there, each plugin a link to the binary install picks
#             for it, and print its about text)
#   release   scripts/release.sh, twice (the second time under another umask
#             and time zone) into temporary folders: the bytes must match, and
#             each tarball hold cniforge and its companions, a hardlink per
#             plugin (to the binary install links it to), SHA256SUMS and its
#             SBOM, which lists every module `go version -m` shows for those
#             binaries with its h1: sum, and the Go version;
#             all seven architectures both times (the second build finds the
#             Go build cache warm: it costs seven links, not seven compiles)
#   tarball   the install from a release (README, docs/release.md): check
#             the download, unpack, check the files, `./cniforge install`
#             (into a temporary folder); and docs/release.md's jq query of
#             the SBOM for x/net's version
#   qemu      scripts/qemu-smoke.sh on those tarballs: each architecture's
#             binary under qemu-user (version, host-local ADD/DEL, loopback
#             ADD/DEL in a netns), one pass/fail line per check
#   bench     sudo scripts/bench.sh, in a short mode (-n 2)
#   go bench  go test -bench . ./plugins/ipam/host-local/, one iteration each
#   killadd   sudo scripts/killadd.sh, in a short mode (-n 3 -g 2, two plugins)
#   parallel  sudo scripts/parallel-bench.sh, in a short mode (-n 1 -p 16)
#   node tool sudo /opt/cni/bin/cniforge ls, check, doctor and gc (a dry
#             run), docs/node-tool.md's read-only verbs, run on the real host
#             by the binary the install above put in a temporary folder
#   startbench docs/benchmarks.md's three lines, in a short mode (-n 2)
#   fuzz      scripts/fuzz.sh -l, and the long run's command for one target
#             and 1s (test_linux.sh fuzzes every target for 2s already)
#   go doc    docs/layout.md's go list ./pkg/... and go doc ./pkg/<name>:
#             every package says what it holds
#
# Left to test_linux.sh, which runs them itself: the VM lane
# (scripts/vmtest.sh), the Podman lane and the CRI lane (docs/testing.md).
#
# The demo and the bench must leave the real host as they found it: its links,
# addresses, routes, rules, netfilter rules, network namespaces and the files
# under /var/lib/cni and /run/cni are compared before and after each. The
# ```sh blocks of README.md and docs/*.md are read too: a command there that
# this script does not know fails the run, so a new instruction cannot go
# untested. (Blocks of plain ``` hold output, or commands shown with
# placeholders as a record of what was run.)
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

work=$(mktemp -d /tmp/cniforge-frontdoor.XXXXXX)
trap 'rm -rf "$work"' EXIT

# ok, fail and the closing count are the lanes' (scripts/lane.sh, which
# brings scripts/binaries.sh too), with the front door's own prefixes.
lane=frontdoor ok_prefix="frontdoor: ok: " fail_prefix="frontdoor: FAILED: "
# shellcheck source=scripts/lane.sh
. scripts/lane.sh

# fail_showing FILE MESSAGE...: fail MESSAGE, then FILE, indented.
fail_showing() {
	local file=$1
	shift
	fail "$@"
	sed 's/^/    /' "$file" >&2
}

# The documents a reader is told to run commands from.
docs=(README.md docs/*.md)

# The commands their ```sh blocks may hold, each exercised below.
known=(
	'./build_linux.sh && sudo scripts/demo.sh'
	'sudo ./test_linux.sh'
	'./build_linux.sh'
	'sudo bin/cniforge install'
	'scripts/release.sh'
	'sha256sum -c --ignore-missing SHA256SUMS'
	'tar -xzf cniforge-<version>-linux-amd64.tgz'
	'cd cniforge-<version>-linux-amd64'
	'sha256sum -c SHA256SUMS'
	'sudo ./cniforge install'
	'sudo scripts/bench.sh'
	'go test -bench . ./plugins/ipam/host-local/'
	'sudo scripts/killadd.sh'
	'sudo scripts/parallel-bench.sh'
	'sudo /opt/cni/bin/cniforge ls'
	'sudo /opt/cni/bin/cniforge check'
	'sudo /opt/cni/bin/cniforge doctor'
	'sudo /opt/cni/bin/cniforge gc'
	'bin/cniforge install --dir /tmp/multi'
	'go run ./scripts/startbench /tmp/multi'
	'nice -n 10 scripts/fuzz.sh -t 5m'
	'scripts/fuzz.sh -l'
	'go list ./pkg/...'
	'go doc ./pkg/<name>'
)
# sh_commands FILE...: the non-empty lines of the files' ```sh blocks.
sh_commands() {
	awk '/^```sh$/ {on = 1; next} /^```/ {on = 0} on && NF' "$@"
}
readme_commands() {
	sh_commands "${docs[@]}"
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
	fail "the README or docs/ tell users to run commands frontdoor.sh does not exercise: $(printf '[%s] ' "${unknown[@]}")"
else
	ok "every command in the sh blocks of ${docs[*]} is exercised here"
fi
for k in "${known[@]}"; do
	readme_commands | grep -qxF -- "$k" || fail "frontdoor.sh exercises [$k], which neither the README nor docs/ says any more; update frontdoor.sh"
done

# snapshot FILE: what a plugin run must not change on the real host
# (scripts/host-snapshot.sh, shared with scripts/podman-lane.sh).
. scripts/host-snapshot.sh
snapshot() {
	host_snapshot "$1"
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
		fail_showing "$work/$name.log" "$name exited $rc; its output:"
		return 1
	fi
	if ! diff -u "$work/$name.before" "$work/$name.after" >"$work/$name.diff"; then
		fail_showing "$work/$name.diff" "$name changed the real host:"
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
		fail_showing "$work/demo.log" "demo exited 0 but did not reach its end (gc: ok, == done, link count); its output:"
	fi
fi

# --- the dhcp demo (bridge + dhcp against dnsmasq) -------------------------
if host_untouched dhcp-demo scripts/dhcp-demo.sh; then
	if grep -qE '^released: [0-9.]+ ' "$work/dhcp-demo.log" && grep -q '^== done' "$work/dhcp-demo.log" &&
		grep -qE '^real host: ([0-9]+) links before the demo, \1 after$' "$work/dhcp-demo.log"; then
		ok "dhcp demo: exit 0, a lease from dnsmasq released on DEL, the host unchanged"
	else
		fail_showing "$work/dhcp-demo.log" "dhcp demo exited 0 but did not reach its end (released, == done, link count); its output:"
	fi
fi
grep -q 'scripts/dhcp-demo.sh' "${docs[@]}" || fail "neither the README nor docs/ mentions scripts/dhcp-demo.sh any more"

# --- install, into a temporary folder --------------------------------------
install_cmd=$(readme_commands | grep -m1 '^sudo bin/cniforge install')
dest=$work/opt/cni/bin
if [ -z "$install_cmd" ]; then
	fail "the README has no 'sudo bin/cniforge install' command"
else
	# The README's own words, sudo dropped, into $dest instead of /opt/cni/bin.
	cmd="${install_cmd#sudo } --dir $dest"
	if ! (eval "$cmd") >"$work/install.log" 2>&1; then
		fail_showing "$work/install.log" "install [$cmd]:"
	else
		bad=()
		for b in $(suite_binaries bin); do
			cmp -s "bin/$b" "$dest/$b" || bad+=("$b: not installed")
		done
		plugins=$(holders bin | cut -d' ' -f1)
		while read -r name want; do
			if [ ! -x "$dest/$name" ]; then
				bad+=("$name: not installed")
				continue
			fi
			[ "$(readlink "$dest/$name")" = "$want" ] || bad+=("$name: not a link to $want")
			# Without CNI_COMMAND a plugin prints its about text on stderr.
			about=$(env -i "$dest/$name" 2>&1 </dev/null)
			case $about in
			"CNI $name plugin "*"(cniforge)"*"CNI protocol versions supported:"*) ;;
			*) bad+=("$name: about text [$about]") ;;
			esac
		done < <(holders bin)
		if [ ${#bad[@]} -eq 0 ] && [ -n "$plugins" ]; then
			ok "install: $(suite_binaries bin) and $(wc -w <<<"$plugins") plugins installed by the README's command, each runs"
		else
			fail "install: ${bad[*]:-bin/cniforge version lists no plugins}"
		fi
	fi
fi

# --- the release, built twice ----------------------------------------------
# The second build finds the Go build cache warm, so it checks the link,
# the tar and the gzip steps, not the compiler's own determinism.
if scripts/release.sh "$work/rel1" >"$work/release.log" 2>&1 &&
	(umask 077 && TZ=Pacific/Kiritimati scripts/release.sh "$work/rel2") >>"$work/release.log" 2>&1; then
	bad=()
	tgzs=$(cd "$work/rel1" && ls *.tgz)
	sboms=$(cd "$work/rel1" && ls *.cdx.json)
	images=$(cd "$work/rel1" && ls *-image-*.tar)
	for f in SHA256SUMS $tgzs $sboms $images; do
		cmp -s "$work/rel1/$f" "$work/rel2/$f" || bad+=("$f differs between two builds")
	done
	for arch in amd64 arm arm64 ppc64le s390x mips64le riscv64; do
		grep -q -- "-linux-$arch.tgz\$" <<<"$tgzs" || bad+=("no $arch tarball")
		grep -q -- "-image-$arch.tar\$" <<<"$images" || bad+=("no $arch node image")
	done
	mkdir -p "$work/rel-x"
	for f in $tgzs; do
		tar -C "$work/rel-x" -xzf "$work/rel1/$f"
		d=$work/rel-x/${f%.tgz}
		(cd "$d" && sha256sum -c --quiet SHA256SUMS) >/dev/null 2>&1 || bad+=("$f: SHA256SUMS does not match")
		# The SBOM against what Go itself reads from the binary: each
		# module (a replacement when there is one) with version and sum.
		if ! cmp -s "$d/sbom.cdx.json" "$work/rel1/${f%.tgz}.cdx.json"; then
			bad+=("$f: sbom.cdx.json is not ${f%.tgz}.cdx.json")
		fi
		listed=$(jq -r '.components[] | [.name, .version, ((.properties // []) | map(select(.name == "go:sum"))[0].value // "")] | @tsv' "$d/sbom.cdx.json" 2>&1)
		gov=$(go version -m $(printf "$d/%s " $(suite_binaries bin)) 2>&1)
		mods=$(awk '$1 == "dep" || $1 == "=>" { if ($1 == "dep" && m != "") print m; m = $2 "\t" $3 "\t" $4 } END { if (m != "") print m }' <<<"$gov")
		[ -n "$mods" ] || bad+=("$f: go version -m lists no modules: $gov")
		while IFS= read -r m; do
			grep -qxF -- "$m" <<<"$listed" || bad+=("$f: the SBOM lacks $(tr '\t' ' ' <<<"$m")")
		done <<<"$mods"
		gover=$(head -1 <<<"$gov" | awk '{print $2}')
		apps=$(jq -r '.components[] | select(.type == "application") | .name' "$d/sbom.cdx.json" 2>&1)
		for b in $(suite_binaries bin); do
			[ "$b" = cniforge ] || grep -qx "$b" <<<"$apps" || bad+=("$f: the SBOM does not list $b")
		done
		grep -qP "^stdlib\t\Q$gover\E\t" <<<"$listed" || bad+=("$f: the SBOM does not name the toolchain $gover")
		# What a node installs beside the binary: the DaemonSet naming this
		# version's image, the gc timer.
		v=${f#cniforge-}
		v=${v%-linux-*}
		grep -qx "          image: cniforge:$v" "$d/cniforge-daemonset.yaml" 2>/dev/null || bad+=("$f: cniforge-daemonset.yaml does not name cniforge:$v")
		grep -q '^ExecStart=/opt/cni/bin/cniforge gc --apply' "$d/systemd/cniforge-gc.service" 2>/dev/null &&
			grep -q '^OnUnitActiveSec=' "$d/systemd/cniforge-gc.timer" 2>/dev/null || bad+=("$f: no systemd units for cniforge gc")
		pairs=$(holders bin) || bad+=("$f: cannot list the plugins of bin/")
		while read -r name b; do
			[ -n "$name" ] || continue
			[ "$(stat -c %i "$d/$name" 2>/dev/null)" = "$(stat -c %i "$d/$b")" ] || bad+=("$f: $name is not a hardlink to $b")
		done <<<"$pairs"
	done
	if [ ${#bad[@]} -eq 0 ] && [ -n "$tgzs" ]; then
		ok "release.sh: $(wc -w <<<"$tgzs") tarballs and their SBOMs, the same bytes twice, hardlinks, SHA256SUMS and the SBOMs' modules and sums right"
	else
		fail "release.sh: ${bad[*]:-no tarballs}"
	fi
	# The install from a release, line by line, <version> filled in and
	# sudo dropped, the install into a temporary folder: as each file that
	# gives it (the README, docs/release.md) words it. Then the SBOM query,
	# which must give the x/net version the binary holds.
	tgz_amd64=$(grep -- '-linux-amd64.tgz$' <<<"$tgzs")
	version=${tgz_amd64#cniforge-}
	version=${version%-linux-amd64.tgz}
	mkdir -p "$work/download"
	cp "$work/rel1"/* "$work/download/"
	for doc in "${docs[@]}"; do
		grep -qx 'sha256sum -c --ignore-missing SHA256SUMS' "$doc" || continue
		rm -rf "$work/tar-dest" "$work/download/cniforge-$version-linux-amd64"
		mkdir -p "$work/tar-dest"
		steps=$(sh_commands "$doc" |
			sed -n '/^sha256sum -c --ignore-missing SHA256SUMS$/,/^sudo .\/cniforge install$/p' |
			sed -e "s/<version>/$version/g" -e 's/^sudo //' -e "s|^./cniforge install\$|./cniforge install --dir $work/tar-dest|")
		if [ "$(wc -l <<<"$steps")" = 5 ] && (cd "$work/download" && set -e && eval "$steps") >"$work/tarball.log" 2>&1 &&
			cmp -s "$work/tar-dest/cniforge" "$work/download/cniforge-$version-linux-amd64/cniforge" &&
			cmp -s "$work/tar-dest/cniforge-light" "$work/download/cniforge-$version-linux-amd64/cniforge-light" &&
			cmp -s "$work/tar-dest/cniforge-dhcp" "$work/download/cniforge-$version-linux-amd64/cniforge-dhcp" &&
			[ "$(readlink "$work/tar-dest/bridge")" = cniforge ] && [ "$(readlink "$work/tar-dest/loopback")" = cniforge-light ] &&
			[ "$(readlink "$work/tar-dest/dhcp")" = cniforge-dhcp ]; then
			ok "$doc's install from a release: sums checked, unpacked, installed"
		else
			fail_showing "$work/tarball.log" "$doc's install from a release: $(printf '%s; ' "$steps")"
		fi
	done
	sbomdoc=$(grep -l -F "select(.name == \"golang.org/x/net\")" "${docs[@]}" | head -1)
	query=$(grep -m1 -F "select(.name == \"golang.org/x/net\")" "${sbomdoc:-/dev/null}" | sed -e 's/^\$ //' -e "s/<version>/$version/g")
	want=$(go version -m "$work/download/cniforge-$version-linux-amd64/cniforge" | awk '$2 == "golang.org/x/net" {print $3}')
	got=$(cd "$work/download" && eval "$query" 2>&1)
	shown=$(grep -A1 -F "select(.name == \"golang.org/x/net\")" "${sbomdoc:-/dev/null}" | sed -n 2p)
	if [ -n "$query" ] && [ -n "$want" ] && [ "$got" = "$want" ] && [ "$shown" = "$want" ]; then
		ok "$sbomdoc's SBOM query gives the x/net the binary holds ($want), as it shows"
	else
		fail "the SBOM query [$query] in [${sbomdoc:-no doc}] gave [$got]; the binary holds [$want]; the doc shows [$shown]"
	fi

	# Each architecture's binary run under qemu-user: its own lines.
	scripts/qemu-smoke.sh "$work/rel1" >"$work/qemu-smoke.log" 2>&1
	grep -qE '^qemu-smoke: [0-9]+ passed, [0-9]+ failed$' "$work/qemu-smoke.log" ||
		fail "qemu-smoke.sh did not reach its end: $(tail -3 "$work/qemu-smoke.log")"
	while IFS= read -r line; do
		case $line in
		"qemu-smoke: ok: "*) ok "${line#qemu-smoke: ok: }" ;;
		"qemu-smoke: FAILED: "*) fail "${line#qemu-smoke: FAILED: }" ;;
		"qemu-smoke: not carried: "*) echo "frontdoor: ${line#qemu-smoke: }" ;;
		esac
	done <"$work/qemu-smoke.log"
else
	fail_showing "$work/release.log" "release.sh:"
fi

# --- the benchmarks, in a short mode ---------------------------------------
if host_untouched bench scripts/bench.sh -n 2; then
	# Every scenario bench.sh knows (its all=(...) list) must print ADD,
	# CHECK and DEL rows: a scenario that silently skipped would hide rot.
	read -ra scenarios < <(sed -n 's/^all=(\(.*\))$/\1/p' scripts/bench.sh)
	missing=()
	for s in "${scenarios[@]}"; do
		for op in ADD CHECK DEL; do
			grep -qE "^$s +$op +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$work/bench.log" || missing+=("$s $op")
		done
	done
	if [ ${#scenarios[@]} -gt 0 ] && [ ${#missing[@]} -eq 0 ]; then
		ok "bench.sh -n 2: ${#scenarios[@]} scenarios (${scenarios[*]}), each with ADD, CHECK and DEL rows, the host unchanged"
	else
		fail_showing "$work/bench.log" "bench.sh -n 2: no timing row for: ${missing[*]:-its scenario list (all=(...)) could not be read}"
	fi
fi
# --- the kill-mid-ADD script, in a short mode ------------------------------
# (tests/killadd at its CI count already ran under go test; this checks the
# script the README names: its sharding and its report.)
if host_untouched killadd scripts/killadd.sh -n 3 -g 2 -j 2 -f '^(ptp/iptables|tap)$'; then
	if grep -qE '^KILLADD ptp/iptables kill\+DEL: 3 trials, 0 leaks' "$work/killadd.log" &&
		grep -qE '^KILLADD tap kill\+GC: 2 trials, 0 leaks' "$work/killadd.log"; then
		ok "killadd.sh -n 3 -g 2: ptp and tap, no leak, the host unchanged"
	else
		fail_showing "$work/killadd.log" "killadd.sh -n 3 -g 2 printed no leak-free count for ptp/iptables and tap:"
	fi
fi
grep -q 'scripts/killadd.sh' "${docs[@]}" || fail "neither the README nor docs/ mentions scripts/killadd.sh any more"
if go test -run '^$' -bench . -benchtime 1x ./plugins/ipam/host-local/ >"$work/gobench.log" 2>&1 &&
	grep -qE '^Benchmark.* ns/op' "$work/gobench.log"; then
	ok "go test -bench . ./plugins/ipam/host-local/ (one iteration each)"
else
	fail_showing "$work/gobench.log" "host-local's Go benchmark:"
fi

# --- parallel pod throughput, in a short mode -------------------------------
if host_untouched parallel-bench scripts/parallel-bench.sh -n 1 -p 16; then
	# Both scenarios on both backends must print a row with figures.
	missing=()
	for s in bridge chain; do
		for be in iptables nftables; do
			grep -qE "^$s +$be +[0-9]+ +16 +[0-9.]+ \\([0-9 ]+\\) +[0-9.]+ \\([0-9 ]+\\) " "$work/parallel-bench.log" || missing+=("$s $be")
		done
	done
	if [ ${#missing[@]} -eq 0 ]; then
		ok "parallel-bench.sh -n 1 -p 16: bridge and chain on iptables and nftables, each with ADD and DEL pods/s, the host unchanged"
	else
		fail_showing "$work/parallel-bench.log" "parallel-bench.sh -n 1 -p 16: no row for: ${missing[*]}"
	fi
fi

# --- the node tool's read-only verbs, on the real host ----------------------
# docs/node-tool.md's `sudo /opt/cni/bin/cniforge VERB`, sudo dropped, by the
# binary the install above put in $dest: it reads the real host's runtime
# cache, configs and plugin folder, and must change nothing. Exit 1 is what
# doctor says when it finds something, and gc when it refuses to act.
while IFS= read -r line; do
	verb=${line#sudo /opt/cni/bin/cniforge }
	if [ ! -x "$dest/cniforge" ]; then
		fail "[$line]: no installed cniforge to run (the install above failed)"
		continue
	fi
	snapshot "$work/node-$verb.before"
	rc=0
	"$dest/cniforge" $verb >"$work/node-$verb.log" 2>&1 || rc=$?
	snapshot "$work/node-$verb.after"
	case $verb in
	ls) want='^attachments \(libcni cache ' ;;
	check) want='^NETWORK +CONTAINER +IFNAME +STATUS +DETAIL$' ;;
	doctor) want='' ;;
	gc) want='' ;;
	esac
	if [ "$rc" -gt 1 ]; then
		fail_showing "$work/node-$verb.log" "[$line] exited $rc:"
	elif grep -qiE '^usage|flag provided but not defined|panic' "$work/node-$verb.log"; then
		fail_showing "$work/node-$verb.log" "[$line] did not run:"
	elif [ -n "$want" ] && ! grep -qE "$want" "$work/node-$verb.log"; then
		fail_showing "$work/node-$verb.log" "[$line] printed no [$want]:"
	elif ! diff -u "$work/node-$verb.before" "$work/node-$verb.after" >"$work/node-$verb.diff"; then
		fail_showing "$work/node-$verb.diff" "[$line] changed the real host:"
	else
		ok "[$line]: exit $rc, the host unchanged"
	fi
done < <(readme_commands | grep -E '^sudo /opt/cni/bin/cniforge (ls|check|doctor|gc)$')

# --- startbench, in a short mode ---------------------------------------------
# docs/benchmarks.md's three lines (./build_linux.sh ran with the demo), the
# folder in $work, two execs per plugin.
multi=$work/multi
if bin/cniforge install --dir "$multi" >"$work/startbench.log" 2>&1 &&
	go run ./scripts/startbench -n 2 -trace 1 "$multi" >>"$work/startbench.log" 2>&1 &&
	grep -qE '^loopback +[0-9.]+ +[0-9.]+ ' "$work/startbench.log" &&
	[ "$(grep -cE '^multi <= sep: ' "$work/startbench.log")" = 2 ]; then
	ok "startbench -n 2: a row per plugin for VERSION and the refused ADD"
else
	fail_showing "$work/startbench.log" "bin/cniforge install --dir D && go run ./scripts/startbench -n 2 -trace 1 D:"
fi

# --- fuzzing: the target list, and the long run's command briefly -----------
if scripts/fuzz.sh -l >"$work/fuzz-l.log" 2>&1 && grep -qE '^Fuzz[A-Za-z0-9]+ (pkg|plugins)/' "$work/fuzz-l.log"; then
	ok "scripts/fuzz.sh -l: $(wc -l <"$work/fuzz-l.log") targets"
	target=$(awk 'NR == 1 {print $1}' "$work/fuzz-l.log")
	if nice -n 10 scripts/fuzz.sh -t 1s "$target" >"$work/fuzz.log" 2>&1; then
		ok "nice -n 10 scripts/fuzz.sh -t 1s $target (the long run's command, briefly)"
	else
		fail_showing "$work/fuzz.log" "nice -n 10 scripts/fuzz.sh -t 1s $target:"
	fi
else
	fail_showing "$work/fuzz-l.log" "scripts/fuzz.sh -l:"
fi

# --- go list ./pkg/... and go doc ./pkg/<name> ------------------------------
# docs/layout.md sends the reader to each package's documentation: every
# package under pkg/ must have some (a package comment go doc prints).
undocumented=()
if pkgs=$(go list ./pkg/... 2>"$work/golist.log") && [ -n "$pkgs" ]; then
	for p in $pkgs; do
		go doc "$p" 2>/dev/null | grep -q "^Package ${p##*/} " || undocumented+=("$p")
	done
	if [ ${#undocumented[@]} -eq 0 ]; then
		ok "go doc: each of the $(wc -w <<<"$pkgs") packages go list ./pkg/... names says what it holds"
	else
		fail "go doc: no package comment for ${undocumented[*]}"
	fi
else
	fail_showing "$work/golist.log" "go list ./pkg/...:"
fi

summary
[ "$failed" = 0 ]
