#!/usr/bin/env bash
# crio-deps.sh — builds CRI-O for the Kubernetes lane's `--runtime crio`
# (scripts/kube-lane.sh), once, into .cache/crio/ (reused by later runs):
#
#   .cache/crio/v1.34.0/crio      the CRI-O daemon (cgo: libseccomp)
#   .cache/crio/v1.34.0/pinns     its helper that pins a pod's namespaces
#   .cache/crio/v1.34.0/copyimg   CRI-O's own test tool that imports an image
#                                 archive into its containers-storage (the
#                                 same storage library as the daemon, so no
#                                 registry, skopeo or podman is needed)
#
# conmon and runc come from Debian (.ci/run installs them; Debian's crun
# 1.8.1 is too old for CRI-O 1.34). Prints nothing when everything is
# already built; needs Go, gcc, make, libseccomp-dev and the network (the
# module proxy) otherwise. The build takes about four minutes on two cores.
#
# CRI-O from the module proxy: the module zip carries everything `go build
# ./cmd/crio` needs (no vendor/); the tags are the ones its Makefile uses
# minus the graph drivers and the gpgme signature backend the lane does not
# need (openpgp is pure Go).
set -euo pipefail
cd "$(dirname "$0")/.."

crio_version=v1.34.0
cache=$PWD/.cache/crio
bin=$cache/$crio_version
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"

for f in crio pinns copyimg; do
	[ -x "$bin/$f" ] || missing=1
done
[ -n "${missing:-}" ] || exit 0

echo "crio-deps: building CRI-O $crio_version into $bin" >&2
dir=$(GOFLAGS=-mod=mod go mod download -json "github.com/cri-o/cri-o@$crio_version" | jq -r .Dir)
src=$cache/src-$crio_version
rm -rf "$src" "$bin.tmp"
mkdir -p "$cache" "$bin.tmp"
cp -r "$dir" "$src"
chmod -R u+w "$src"
(
	cd "$src"
	tags="containers_image_openpgp containers_image_ostree_stub exclude_graphdriver_btrfs exclude_graphdriver_devicemapper seccomp"
	GOWORK=off CGO_ENABLED=1 go build -tags "$tags" -o "$bin.tmp/" ./cmd/crio ./test/copyimg
	make -s -C pinns >/dev/null
	cp bin/pinns "$bin.tmp/"
)
rm -rf "$bin" "$src"
mv "$bin.tmp" "$bin"
