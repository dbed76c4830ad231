#!/usr/bin/env bash
# Builds every plugin into bin/<name>, and the multicall bin/cniforge: static,
# trimmed, stripped, with the suite's version in the about text a plugin
# prints without CNI_COMMAND.
set -euo pipefail
cd "$(dirname "$0")"

version=$(git describe --tags --always --dirty 2>/dev/null || echo "0.0.0-unknown")
out=${CNIFORGE_BIN:-bin}
mkdir -p "$out"

# Every cmd/<name>: one binary per plugin, and cmd/cniforge, the multicall
# binary holding them all (what `cniforge install` and the release ship).
plugins=()
for d in cmd/*/; do
	plugins+=("./cmd/$(basename "$d")")
done

echo "building ${#plugins[@]} binaries ($version) into $out/"
# -buildvcs=false: the version comes in through -X; VCS stamping would only
# fail in a checkout owned by another user ("dubious ownership").
CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X github.com/cniforge/plugins/pkg/plugin.Version=$version" \
	-o "$out/" "${plugins[@]}"
