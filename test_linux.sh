#!/usr/bin/env bash
# Runs every test: builds the plugins (tests exec them as IPAM delegates and
# as binaries), then `go test -race` over every package, as root. Exits
# non-zero on any failure.
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

echo "== go test -race (host kernel)"
go test -race -count=1 -timeout 20m ./... "$@"
