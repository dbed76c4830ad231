#!/usr/bin/env bash
# vmtest.sh COMMAND [ARGS...]
#
# Runs COMMAND as root inside a qemu guest booted with Debian bookworm's
# standard kernel, in the caller's working directory and environment, streams
# its stdout and stderr back, and exits with COMMAND's exit code. The guest
# sees the host's root read-only (writes land in a tmpfs overlay and vanish),
# has no network to the outside, and has the veth, ipvlan, 8021q, vrf, bridge
# and dummy modules loaded. See scripts/vm/README.md.
#
# Exit codes besides COMMAND's own:
#   124  the guest ran past CNIFORGE_VM_TIMEOUT seconds (default 1200)
#   125  the guest never reported an exit code (no qemu, kernel download
#        failed, boot failure, panic); the console log tail is printed
#
# Environment:
#   CNIFORGE_VM_TIMEOUT  seconds before the guest is killed (default 1200)
#   CNIFORGE_VM_KERNEL   kernel package to boot (default: the one
#                        bookworm's linux-image-amd64 depends on)
#   CNIFORGE_VM_CACHE    download/unpack cache (default <repo>/.cache/vm)
#   CNIFORGE_VM_MEM, CNIFORGE_VM_CPUS  guest size (default 2G, 2)
set -euo pipefail

readonly LANE_FAILED=125
readonly TIMED_OUT=124

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# Resolved: the guest sees the host's root at /host, so a link on the way
# (a worktree's .cache -> /work/main/.cache) would lead it out of /host.
cache=$(realpath -m "${CNIFORGE_VM_CACHE:-$repo/.cache/vm}")
timeout=${CNIFORGE_VM_TIMEOUT:-1200}
caller=$PPID

say() { echo "vmtest: $*" >&2; }
die() {
	say "$*"
	exit $LANE_FAILED
}

if [ $# -eq 0 ]; then
	echo "usage: $0 COMMAND [ARGS...]" >&2
	exit 2
fi
[ "$(id -u)" = 0 ] || die "needs root (the guest shares the host's root over 9p)"
qemu=$(command -v qemu-system-x86_64) ||
	die "qemu-system-x86_64 not found: install qemu-system-x86 (scripts/vm/install-deps.sh)"
busybox=$(command -v busybox) || die "busybox not found: install busybox-static (scripts/vm/install-deps.sh)"
# The initramfs has no libc: busybox must be the static build.
if ldd "$busybox" >/dev/null 2>&1; then
	die "$busybox is dynamically linked: install busybox-static"
fi

# kernel_pkg prints the kernel package to boot: the one bookworm's
# linux-image-amd64 depends on (bookworm-security carries the newest), or an
# already unpacked one when apt knows none (offline, no apt lists).
kernel_pkg() {
	if [ -n "${CNIFORGE_VM_KERNEL:-}" ]; then
		echo "$CNIFORGE_VM_KERNEL"
		return
	fi
	local p
	p=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-6\.1\.0-[0-9]+-amd64$/ {print $2; exit}') || true
	if [ -z "$p" ]; then
		p=$(find "$cache" -maxdepth 1 -name 'linux-image-*-amd64' -printf '%f\n' 2>/dev/null | sort -V | tail -n 1)
	fi
	[ -n "$p" ] || return 1
	echo "$p"
}

# ensure_kernel unpacks the kernel package into $cache/$pkg (once): a plain
# vmlinux (decompressing the bzImage's xz payload in emulation costs ~3.5 s
# per boot) and the modules with a busybox-made index (the host has no kmod).
# Concurrent runs serialise on a lock; the unpack is moved into place whole.
ensure_kernel() {
	local pkg=$1 dir=$cache/$1
	[ -f "$dir/.done" ] && return 0
	mkdir -p "$cache"
	exec 9>"$cache/.lock"
	flock 9
	if [ -f "$dir/.done" ]; then
		exec 9>&-
		return 0
	fi
	say "fetching $pkg (once; cached in $dir)"
	local tmp
	tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
	(cd "$tmp" && apt-get download "$pkg" >/dev/null 2>"$tmp/apt.log") || {
		cat "$tmp/apt.log" >&2
		rm -rf "$tmp"
		die "apt-get download $pkg failed (needs bookworm-security in the apt sources and apt-get update)"
	}
	mkdir "$tmp/root"
	dpkg-deb -x "$tmp"/*.deb "$tmp/root"
	local kver
	kver=$(ls "$tmp/root/lib/modules")
	[ -n "$kver" ] && [ -f "$tmp/root/boot/vmlinuz-$kver" ] || die "$pkg holds no kernel"
	extract_vmlinux "$tmp/root/boot/vmlinuz-$kver" "$tmp/vmlinux" || die "cannot extract vmlinux from $pkg"
	mkdir -p "$tmp/lib/modules"
	mv "$tmp/root/lib/modules/$kver" "$tmp/lib/modules/"
	"$busybox" depmod -b "$tmp" "$kver"
	echo "$kver" >"$tmp/kver"
	rm -rf "$tmp/root" "$tmp"/*.deb "$tmp/apt.log"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	touch "$dir/.done"
	exec 9>&-
}

# extract_vmlinux finds the xz stream in a bzImage and decompresses it.
extract_vmlinux() {
	local off
	off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$1" | head -n 1 | cut -d: -f1)
	[ -n "$off" ] || return 1
	tail -c +$((off + 1)) "$1" | xz -dc --single-stream >"$2" 2>/dev/null || true
	[ "$(head -c 4 "$2" | od -An -c | tr -d ' ')" = '177ELF' ]
}

# module_closure prints the module files (relative to lib/modules/$kver)
# that modprobe NAME... needs, dependencies included.
module_closure() {
	local moddir=$1
	shift
	awk -v want="$*" '
		function base(p) { sub(/.*\//, "", p); sub(/\.ko(\.[a-z]+)?$/, "", p); gsub(/-/, "_", p); return p }
		BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) { gsub(/-/, "_", w[i]); need[w[i]] = 1 } }
		{ sub(/:$/, "", $1); deps[base($1)] = $0; path[base($1)] = $1 }
		END {
			changed = 1
			while (changed) {
				changed = 0
				for (m in need) {
					if (!(m in deps)) continue
					k = split(deps[m], d, /[: ]+/)
					for (i = 2; i <= k; i++) if (d[i] != "" && !(base(d[i]) in need)) { need[base(d[i])] = 1; changed = 1 }
				}
			}
			for (m in need) if (m in path) print path[m]
		}' "$moddir/modules.dep"
}

pkg=$(kernel_pkg) || die "no kernel package: apt knows no linux-image-amd64 (run apt-get update) and $cache holds none"
ensure_kernel "$pkg"
kdir=$cache/$pkg
kver=$(cat "$kdir/kver")

run=$(mktemp -d "${TMPDIR:-/tmp}/cniforge-vm.XXXXXX")
qpid=
watchdog=
readers=()
cleanup() {
	[ -n "$qpid" ] && kill -KILL "$qpid" 2>/dev/null
	[ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
	[ ${#readers[@]} -gt 0 ] && kill "${readers[@]}" 2>/dev/null
	rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# The initramfs: busybox, the init script, the modules needed to reach the
# host root, and where to find the rest. Built per run (a fraction of a
# second) so it always matches scripts/vm/init.
ird=$run/initramfs
mkdir -p "$ird/bin" "$ird/etc" "$ird/lib/modules/$kver"
cp "$busybox" "$ird/bin/busybox"
cp "$here/vm/init" "$ird/init"
chmod 755 "$ird/init"
(cd "$kdir/lib/modules/$kver" &&
	module_closure . virtio_pci virtio_console 9pnet_virtio 9p overlay |
	while read -r m; do
		mkdir -p "$ird/lib/modules/$kver/$(dirname "$m")"
		cp "$m" "$ird/lib/modules/$kver/$m"
	done)
"$busybox" depmod -b "$ird" "$kver"
{
	printf 'KVER=%q\n' "$kver"
	printf 'MODULES=%q\n' "$kdir/lib/modules/$kver"
	printf 'JOB=%q\n' "$run/job.sh"
} >"$ird/etc/vmtest.conf"
(cd "$ird" && find . | "$busybox" cpio -o -H newc 2>/dev/null) >"$run/initramfs.cpio"

# The job: the caller's environment and directory, then COMMAND.
{
	echo '#!/bin/bash'
	while IFS= read -r -d '' kv; do
		name=${kv%%=*}
		case $name in
		PWD | OLDPWD | SHLVL | _ | BASH_* | SHELLOPTS | BASHOPTS) continue ;;
		esac
		[[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
		printf 'export %s=%q\n' "$name" "${kv#*=}"
	done < <(env -0)
	printf 'cd %q || exit %d\n' "$PWD" $LANE_FAILED
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} >"$run/job.sh"

for p in stdout stderr; do
	mkfifo "$run/$p.in" "$run/$p.out"
done
# When the caller stops reading (`vmtest.sh ... | head`), the rest is
# drained: a full pipe would stall the guest until the timeout.
cat "$run/stdout.out" | { cat || cat >/dev/null; } &
readers+=($!)
cat "$run/stderr.out" | { cat >&2 || cat >/dev/null; } &
readers+=($!)

# -no-reboot + panic=-1: a panicking guest exits qemu at once. setpriv's
# parent-death signal kills qemu if this script is killed outright; the
# watchdog below covers the caller being killed and the timeout.
setpriv --pdeathsig KILL -- "$qemu" \
	-nodefaults -no-user-config -nographic -no-reboot \
	-accel tcg -cpu max -m "${CNIFORGE_VM_MEM:-2G}" -smp "${CNIFORGE_VM_CPUS:-2}" -nic none \
	-kernel "$kdir/vmlinux" -initrd "$run/initramfs.cpio" \
	-append "console=ttyS0 quiet panic=-1 rdinit=/init" \
	-serial "file:$run/console.log" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-device virtio-serial-pci \
	-chardev "pipe,id=stdout,path=$run/stdout" -device virtserialport,chardev=stdout,name=vmtest.stdout \
	-chardev "pipe,id=stderr,path=$run/stderr" -device virtserialport,chardev=stderr,name=vmtest.stderr \
	-chardev "file,id=rc,path=$run/rc" -device virtserialport,chardev=rc,name=vmtest.rc \
	</dev/null >"$run/qemu.log" 2>&1 &
qpid=$!

self=$$
(
	trap - EXIT HUP INT TERM
	deadline=$((SECONDS + timeout))
	while kill -0 "$qpid" 2>/dev/null; do
		if ! kill -0 "$self" 2>/dev/null; then
			# Killed outright: nobody else is left to clean up.
			kill -KILL "$qpid" 2>/dev/null
			rm -rf "$run"
			exit 0
		fi
		if ! kill -0 "$caller" 2>/dev/null; then
			: >"$run/caller-gone"
			kill -KILL "$qpid" 2>/dev/null
			exit 0
		fi
		if [ $SECONDS -ge $deadline ]; then
			: >"$run/timed-out"
			kill -KILL "$qpid" 2>/dev/null
			exit 0
		fi
		sleep 1
	done
) &
watchdog=$!

qrc=0
{ wait "$qpid"; } 2>/dev/null || qrc=$?
qpid=
kill "$watchdog" 2>/dev/null || true
wait "$watchdog" 2>/dev/null || true
watchdog=
# The readers end when qemu closes the pipes; waiting for them flushes the
# last output before the exit code is decided. Opening each pipe once more
# releases a reader still blocked in open() because qemu never started.
for p in stdout stderr; do
	exec {fd}<>"$run/$p.out"
	exec {fd}>&-
done
wait "${readers[@]}" 2>/dev/null || true
readers=()

if [ -e "$run/caller-gone" ]; then
	say "caller (pid $caller) is gone; stopped the guest running: $*"
	exit $LANE_FAILED
fi
if [ -e "$run/timed-out" ]; then
	say "guest timed out after ${timeout}s running: $*"
	exit $TIMED_OUT
fi
code=$(tr -dc '0-9' <"$run/rc" 2>/dev/null || true)
if [ -z "$code" ]; then
	say "guest never reported an exit code (qemu exit status $qrc); qemu said:"
	tail -n 20 "$run/qemu.log" >&2 || true
	say "guest console (last 40 lines):"
	tail -n 40 "$run/console.log" >&2 || true
	exit $LANE_FAILED
fi
exit "$code"
