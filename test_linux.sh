#!/usr/bin/env bash
# Runs every test: builds the plugins (tests exec them as IPAM delegates and
# as binaries), then `go test -race` over every package, as root, then the
# kernel specs in the VM lane (scripts/vm/kernel-lane.sh), then every command
# the README and docs/ give a reader (scripts/frontdoor.sh: the demo, the install,
# the benchmarks), then Podman against our plugins (scripts/podman-lane.sh),
# then containerd's CRI plugin driven by crictl (scripts/cri-lane.sh), then
# a single-node Kubernetes cluster (scripts/kube-lane.sh).
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"

if [ "$(id -u)" != 0 ]; then
	echo "test_linux.sh: the tests make network namespaces and need root; run it as root (sudo ./test_linux.sh)" >&2
	exit 1
fi

./build_linux.sh
export CNIFORGE_BIN="$PWD/bin"

echo "== go vet"
go vet ./...

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/kernel-skips"
export CNIFORGE_KERNEL_SKIPS="$work/kernel-skips"
# The version comes in through -ldflags; VCS stamping would only fail in a
# checkout owned by another user ("dubious ownership").
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"

# -json feeds scripts/testsummary, which prints what plain `go test` would
# (an ok line per package, the full output of failures) and counts specs.
echo "== go test -race (host kernel)"
go build -o "$work/testsummary" ./scripts/testsummary
go test -race -count=1 -timeout 20m -json ./... "$@" | "$work/testsummary" -label host -counts "$work/host"

# Fuzzing: each Go fuzz target (every config parser, the on-disk state
# files) runs with -fuzz for a moment; their seed corpora already ran in
# go test above. A finding (panic, hang, an error without a CNI code)
# fails the run. The long campaign is scripts/fuzz.sh -t 5m.
echo "== fuzz (scripts/fuzz.sh, 2s per target)"
scripts/fuzz.sh -t 2s

# The VM lane: specs labelled "kernel" (ipvlan, vlan, dummy, vrf, bridge
# VLANs) skip on a host kernel without those features; here they run in a
# qemu guest booted with Debian bookworm's kernel, where they must pass.
# No qemu means failure, never a silent pass (CNIFORGE_SKIP_VM_LANE=1 opts
# out loudly). See scripts/vm/README.md.
echo "== VM lane (kernel specs under Debian's kernel in qemu)"
# --pdeathsig: if this script is killed, the lane ends too (and vmtest.sh,
# watching the lane, kills qemu) instead of running on to its timeout.
setpriv --pdeathsig TERM scripts/vm/kernel-lane.sh | tee "$work/lane"

# run_lane KEY SCRIPT [ARG...]: runs SCRIPT (its output teed to $work/KEY)
# and adds the counts of its closing "NAME: P passed, F failed" line (NAME:
# SCRIPT's name without .sh) to KEY_passed and KEY_failed; a failing exit
# is kept in KEY_rc. A run that prints no count ends this script.
run_lane() {
	local key=$1 script=$2 rc=0 p f
	shift 2
	"$script" "$@" | tee "$work/$key" || rc=$?
	[ "$rc" = 0 ] || printf -v "${key}_rc" %s "$rc"
	# read fails when awk prints nothing; under set -e that would end the
	# script silently, before the message below says why.
	read -r p f < <(awk -v n="$(basename "$script" .sh)" '$0 ~ "^" n ": [0-9]+ passed, [0-9]+ failed$" {print $2, $4}' "$work/$key") || true
	if [ -z "${p:-}" ]; then
		echo "test_linux.sh: $script${*:+ $*} printed no count (exit $rc)" >&2
		exit 1
	fi
	printf -v "${key}_passed" %s $((${key}_passed + p))
	printf -v "${key}_failed" %s $((${key}_failed + f))
}

# The front door: every command the README and docs/ tell a reader to run (the
# demo, the install, the benchmarks in a short mode), with the real host
# compared before and after. See scripts/frontdoor.sh.
echo "== the commands of the README and docs/ (scripts/frontdoor.sh)"
fd_rc=0 fd_passed=0 fd_failed=0
run_lane fd scripts/frontdoor.sh

# The Podman lane: a real runtime (Podman with the CNI network backend)
# against a `cniforge install` in a temporary plugin dir, inside namespaces
# and private mounts it makes, the real host compared before and after.
# See scripts/podman-lane.sh.
echo "== the Podman lane (scripts/podman-lane.sh)"
pl_rc=0 pl_passed=0 pl_failed=0
run_lane pl scripts/podman-lane.sh

# The CRI lane: containerd 1.6 (Debian's) and 2.x driven by crictl as a
# kubelet drives them, with a Kubernetes-shaped conflist over a `cniforge
# install`, in namespaces and private mounts it makes, the real host
# compared before and after. See scripts/cri-lane.sh.
echo "== the CRI lane (scripts/cri-lane.sh)"
cl_rc=0 cl_passed=0 cl_failed=0
run_lane cl scripts/cri-lane.sh

# The Kubernetes lane: etcd, the API server, controller manager, scheduler
# and a kubelet over containerd 2.x (every stage), over Debian's
# containerd 1.6 (the install and the pods) and over CRI-O (the install,
# the pods and what CRI-O does differently), in namespaces and private
# mounts it makes; our DaemonSet installs the plugins, pods run through the
# kubelet, the real host compared before and after. See scripts/kube-lane.sh.
kl_rc=0 kl_passed=0 kl_failed=0
for kube_run in "--runtime containerd2" "--runtime containerd1 --stages pods" "--runtime crio --stages pods,crio"; do
	echo "== the Kubernetes lane (scripts/kube-lane.sh $kube_run)"
	# shellcheck disable=SC2086 # one word per argument
	run_lane kl scripts/kube-lane.sh $kube_run
done

# The closing count: host results, with the kernel specs that skipped on the
# host credited as passed when the lane ran them (it fails unless all pass).
# Only the specs that skipped on this host (kernelfeature logs each) are
# credited: on a host kernel with the features they passed here already.
read -r passed failed skipped <"$work/host"
lane=$(awk '/^skipcheck: [0-9]+ kernel spec\(s\) ran and passed$/ {n += $2} END {print n + 0}' "$work/lane")
credited=$(wc -l <"$work/kernel-skips")
if [ "$credited" -gt "$lane" ]; then
	echo "test_linux.sh: $credited kernel specs skipped on the host but the VM lane passed only $lane" >&2
	exit 1
fi
echo "== all tests (host + VM lane: $lane kernel specs ran in the guest, $credited of them skipped on this host; $fd_passed README and docs/ commands; $pl_passed Podman lane checks; $cl_passed CRI lane checks; $kl_passed Kubernetes lane checks)"
echo "total: $((passed + credited + fd_passed + pl_passed + cl_passed + kl_passed)) passed, $((failed + fd_failed + pl_failed + cl_failed + kl_failed)) failed, $((skipped - credited)) skipped"
[ "$fd_rc" = 0 ] && [ "$fd_failed" = 0 ] && [ "$pl_rc" = 0 ] && [ "$pl_failed" = 0 ] && [ "$cl_rc" = 0 ] && [ "$cl_failed" = 0 ] && [ "$kl_rc" = 0 ] && [ "$kl_failed" = 0 ]
