#!/usr/bin/env bash
# qemu-smoke.sh — runs each release tarball's binary on its own
# architecture, under qemu-user (Debian's qemu-user-static) where it is not
# the machine's:
#
#   version    `cniforge version` lists the plugins and spec versions
#   host-local ADD, then DEL, through a link named host-local, on a
#              temporary data dir: the address file appears and goes
#   loopback   ADD, then DEL, in a network namespace this script makes:
#              the netlink path (setns on a locked thread, an rtnetlink
#              socket, RTM_GETLINK/RTM_NEWLINK/RTM_GETADDR); ADD must report
#              127.0.0.1/8, which the kernel gives lo only once it is up
#
# qemu-user passes the syscalls the plugins make (setns, netlink sockets,
# threads) to the host kernel. What it cannot carry:
#   - rtnetlink for a big-endian guest (s390x) on a little-endian host:
#     qemu must rewrite every message's byte order and knows only some
#     attributes; qemu 7.2 (bookworm) refuses the plugins' first request
#     (RTM_GETLINK by name) with EINVAL before anything reaches the kernel
#     (strace shows no sendto). The s390x loopback check is then reported
#     as "not carried", counted neither way; should a later qemu carry it,
#     it must pass like the others, and any other error fails.
#   - netfilter (nftables over nfnetlink, iptables' exec of the host's
#     binaries), link kinds the host kernel lacks, and so every plugin past
#     loopback: that part of the netlink path is the amd64 suite's.
#
# Prints "qemu-smoke: ok: ..." or "qemu-smoke: FAILED: ..." per check and
# closes with "qemu-smoke: N passed, N failed". Run as root (the namespace):
#
#   scripts/qemu-smoke.sh RELEASE_DIR     (what scripts/release.sh wrote)
set -uo pipefail
export LC_ALL=C

rel=${1:?usage: qemu-smoke.sh RELEASE_DIR}
passed=0 failed=0
ok() {
	passed=$((passed + 1))
	echo "qemu-smoke: ok: $*"
}
fail() {
	failed=$((failed + 1))
	echo "qemu-smoke: FAILED: $*"
}

work=$(mktemp -d /tmp/cniforge-qemu.XXXXXX)
netns=cniforge-qemu-$$
cleanup() {
	ip netns del "$netns" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# qemu_for GOARCH: the qemu-user binary for it, "" on this machine's own.
qemu_for() {
	local q
	case $1 in
	amd64) q=x86_64 ;;
	arm) q=arm ;;
	arm64) q=aarch64 ;;
	ppc64le) q=ppc64le ;;
	s390x) q=s390x ;;
	mips64le) q=mips64el ;;
	riscv64) q=riscv64 ;;
	*) return 1 ;;
	esac
	[ "$q" = "$(uname -m)" ] && return 0
	echo "qemu-$q-static"
}

ip netns add "$netns" || fail "ip netns add $netns"
shopt -s nullglob
tgzs=("$rel"/cniforge-*-linux-*.tgz)
[ ${#tgzs[@]} -gt 0 ] || fail "no tarballs in $rel"
for tgz in "${tgzs[@]}"; do
	name=$(basename "$tgz" .tgz)
	arch=${name##*-linux-}
	if ! qemu=$(qemu_for "$arch"); then
		fail "$arch: no qemu-user known for it"
		continue
	fi
	if [ -n "$qemu" ] && ! command -v "$qemu" >/dev/null; then
		fail "$arch: $qemu is not installed (apt-get install qemu-user-static)"
		continue
	fi
	tar -C "$work" -xzf "$tgz"
	d=$work/$name
	run() { # run PLUGIN: the binary named PLUGIN in $d, under qemu if needed
		local p=$1
		shift
		if [ -n "$qemu" ]; then "$qemu" "$d/$p" "$@"; else "$d/$p" "$@"; fi
	}

	out=$(run cniforge version 2>&1)
	if grep -q '^plugins: .*host-local.*loopback' <<<"$out" && grep -q '^CNI protocol versions supported: .*1\.1\.0' <<<"$out"; then
		ok "$arch: cniforge version${qemu:+ (under $qemu)}"
	else
		fail "$arch: cniforge version printed [$out]"
	fi

	data=$work/data-$arch
	conf=$(printf '{"cniVersion":"1.1.0","name":"smoke","type":"host-local","ipam":{"type":"host-local","dataDir":"%s","ranges":[[{"subnet":"10.99.0.0/29"}]]}}' "$data")
	export CNI_CONTAINERID=smoke-$arch CNI_IFNAME=eth0 CNI_NETNS=/run/netns/$netns CNI_PATH=$d
	add=$(CNI_COMMAND=ADD run host-local <<<"$conf" 2>&1)
	if [ -f "$data/smoke/10.99.0.2" ] && grep -q '"address": "10.99.0.2/29"' <<<"$add" &&
		del=$(CNI_COMMAND=DEL run host-local <<<"$conf" 2>&1) && [ ! -e "$data/smoke/10.99.0.2" ]; then
		ok "$arch: host-local ADD reserved 10.99.0.2/29 in a temporary data dir, DEL released it"
	else
		fail "$arch: host-local ADD/DEL: ADD printed [$add], DEL [${del:-}], left: $(ls "$data/smoke" 2>&1 | tr '\n' ' ')"
	fi

	conf='{"cniVersion":"1.1.0","name":"smoke-lo","type":"loopback"}'
	export CNI_IFNAME=lo
	ip -n "$netns" link set lo down
	add=$(CNI_COMMAND=ADD run loopback <<<"$conf" 2>&1)
	if grep -q '"address": "127.0.0.1/8"' <<<"$add" && del=$(CNI_COMMAND=DEL run loopback <<<"$conf" 2>&1); then
		ok "$arch: loopback ADD brought lo up in a netns over netlink (127.0.0.1/8 reported), DEL succeeded"
	elif [ "$arch" = s390x ] && [ -n "$qemu" ] && grep -q 'link \\"lo\\": invalid argument' <<<"$add"; then
		echo "qemu-smoke: not carried: $arch: $qemu refuses the big-endian guest's rtnetlink request (EINVAL); loopback not run"
	else
		fail "$arch: loopback ADD/DEL in $netns: ADD printed [$add], DEL [${del:-}]"
	fi
	unset del
	rm -rf "$d"
done

echo "qemu-smoke: $passed passed, $failed failed"
[ "$failed" = 0 ]
