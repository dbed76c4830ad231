#!/usr/bin/env bash
# release.sh — builds the release tarballs into OUTDIR (default release/):
#
#   cniforge-<version>-linux-<arch>.tgz  for amd64, arm, arm64, ppc64le,
#                                        s390x, mips64le and riscv64 (the
#                                        architectures upstream releases)
#   cniforge-<version>-linux-<arch>.cdx.json  its bill of materials
#   cniforge-<version>-image-<arch>.tar  the node image (scripts/image): the
#                                        three binaries alone, whose command
#                                        installs them into the host's /opt/cni/bin
#                                        (deploy/cniforge-daemonset.yaml);
#                                        ctr, podman and docker load it
#   SHA256SUMS                           (of the tarballs, SBOMs and images)
#
# Each tarball holds one folder cniforge-<version>-linux-<arch>/ with the
# multicall binaries, `cniforge` (every plugin but dhcp, and the node tool)
# and its companions (plugins/companion: `cniforge-light`, the light plugins,
# which start cheaper there; `cniforge-dhcp`, dhcp and its daemon), every
# plugin name as a hardlink to one of them (as `cniforge install` links
# them), the SBOM of all as sbom.cdx.json, the DaemonSet manifest naming this version's image
# (deploy/cniforge-daemonset.yaml), systemd units that run `cniforge gc
# --apply` every 10 minutes (systemd/), and a SHA256SUMS of those files. The SBOM
# (CycloneDX 1.6 JSON, scripts/sbom) lists the Go toolchain and every
# module linked into those binaries with its version and go.sum checksum,
# read from the binaries' own build information; it has no timestamp, so
# it is reproducible with the rest. `cniforge install` from there (or copying
# the folder's files to /opt/cni/bin) installs the suite.
#
# The build is reproducible: the same commit gives the same bytes. The
# binaries are built with -trimpath and an empty build ID; the tar entries are
# sorted, owned by 0:0, with the commit's time as mtime and fixed modes;
# gzip stores no name or time. GOARCHES="amd64 arm64" limits the
# architectures. The per-architecture levels (GOARM=7 as upstream's arm,
# and Go's defaults for the others) are pinned so that the environment
# cannot change the bytes.
#
#   scripts/release.sh [OUTDIR]
set -euo pipefail
export LC_ALL=C TZ=UTC
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=${1:-release}
mkdir -p "$out"
out=$(cd "$out" && pwd)

version=$(git describe --tags --always --dirty 2>/dev/null || echo "0.0.0-unknown")
# The commit's time, not the clock's: the same commit gives the same mtimes.
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
arches=${GOARCHES:-amd64 arm arm64 ppc64le s390x mips64le riscv64}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The plugin names, the companions and what each holds: from binaries this
# machine can run.
CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$stage/cniforge-host" ./cmd/cniforge
plugins=$("$stage/cniforge-host" version | sed -n 's/^plugins: //p')
companions=$("$stage/cniforge-host" version | sed -n 's/^companions: //p')
if [ -z "$plugins" ] || [ -z "$companions" ]; then
	echo "release.sh: cniforge version listed no plugins or no companions" >&2
	exit 1
fi
declare -A holder=()
for c in $companions; do
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$stage/$c-host" "./cmd/$c"
	held=$("$stage/$c-host" version | sed -n 's/^plugins: //p')
	if [ -z "$held" ]; then
		echo "release.sh: $c version listed no plugins" >&2
		exit 1
	fi
	for p in $held; do
		holder[$p]=$c
		[[ " $plugins " == *" $p "* ]] || plugins+=" $p"
	done
done
plugins=$(tr ' ' '\n' <<<"$plugins" | sort | xargs)
binaries="cniforge $companions"
go build -o "$stage/sbom" ./scripts/sbom
go build -o "$stage/image" ./scripts/image

tarballs=()
for arch in $arches; do
	name=cniforge-$version-linux-$arch
	dir=$stage/$name
	mkdir "$dir"
	echo "release.sh: building $name"
	for b in $binaries; do
		CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOARM=7 GOAMD64=v1 GOARM64=v8.0 GOPPC64=power8 \
			GOMIPS64=hardfloat GORISCV64=rva20u64 go build -trimpath -buildvcs=false \
			-ldflags "-s -w -buildid= -X github.com/cniforge/plugins/pkg/plugin.Version=$version" \
			-o "$dir/$b" ./cmd/$b
	done
	for p in $plugins; do
		ln "$dir/${holder[$p]:-cniforge}" "$dir/$p"
	done
	"$stage/sbom" -version "$version" $(printf "$dir/%s " $binaries) >"$dir/sbom.cdx.json"
	mkdir "$dir/systemd"
	cp deploy/systemd/cniforge-gc.service deploy/systemd/cniforge-gc.timer "$dir/systemd/"
	sed "s|image: cniforge:VERSION|image: cniforge:$version|" deploy/cniforge-daemonset.yaml >"$dir/cniforge-daemonset.yaml"
	(cd "$dir" && sha256sum $binaries $plugins sbom.cdx.json cniforge-daemonset.yaml systemd/* | sort -k2 >SHA256SUMS)
	chmod 0755 "$dir" $(printf "$dir/%s " $binaries) "$dir/systemd"
	chmod 0644 "$dir/SHA256SUMS" "$dir/sbom.cdx.json" "$dir/cniforge-daemonset.yaml" "$dir"/systemd/*
	cp "$dir/sbom.cdx.json" "$out/$name.cdx.json"
	chmod 0644 "$out/$name.cdx.json"
	tar -C "$stage" --sort=name --format=gnu --owner=0 --group=0 --numeric-owner \
		--mtime="@$epoch" -cf - "$name" | gzip -9n >"$out/$name.tgz"
	"$stage/image" -bin "$dir/cniforge" -arch "$arch" -version "$version" -epoch "$epoch" \
		-tag "cniforge:$version" -o "$out/cniforge-$version-image-$arch.tar"
	chmod 0644 "$out/cniforge-$version-image-$arch.tar"
	tarballs+=("$name.tgz" "$name.cdx.json" "cniforge-$version-image-$arch.tar")
done
(cd "$out" && sha256sum "${tarballs[@]}" >SHA256SUMS)
for t in "${tarballs[@]}"; do
	echo "release.sh: $out/$t ($(stat -c %s "$out/$t") bytes)"
done
