#!/usr/bin/env bash
# install-deps.sh [--warm] — installs the Debian packages the VM lane needs
# (scripts/vm/packages.txt). With --warm it also fetches and unpacks the
# guest kernel into .cache/vm/ and boots the guest once, so the first test
# run neither downloads 70 MB nor finds out late that the lane is broken.
# Needs root and apt (Debian bookworm).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

mapfile -t pkgs < <(grep -vE '^\s*(#|$)' "$here/packages.txt")
# vmtest.sh picks the kernel through linux-image-amd64's dependency; without
# apt lists (a fresh container) apt knows no packages at all.
if ! apt-cache show linux-image-amd64 >/dev/null 2>&1; then
	apt-get update
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}"

if [ "${1:-}" = --warm ]; then
	"$here/../vmtest.sh" true
	echo "install-deps: the VM lane boots"
fi
