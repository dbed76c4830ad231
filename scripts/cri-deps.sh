#!/usr/bin/env bash
# cri-deps.sh — builds what the CRI lane (scripts/cri-lane.sh) needs and
# Debian does not ship, once, into .cache/cri/ (reused by later runs):
#
#   .cache/cri/crictl-v1.37.0/crictl                 sigs.k8s.io/cri-tools
#   .cache/cri/containerd-v2.4.2/{containerd,containerd-shim-runc-v2,ctr}
#
#   scripts/cri-deps.sh [crictl] [containerd2]   (default: both)
#
# containerd 1.6 and runc come from Debian (.ci/run installs them). Prints
# nothing when everything is already built; needs Go and the network (the
# module proxy) otherwise. The builds take minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."

crictl_version=v1.37.0
containerd_version=v2.4.2
cache=$PWD/.cache/cri

want=${*:-crictl containerd2}
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"
if [[ " $want " = *" crictl "* ]] && [ ! -x "$cache/crictl-$crictl_version/crictl" ]; then
	echo "cri-deps: building crictl $crictl_version into $cache/crictl-$crictl_version" >&2
	GOBIN=$cache/crictl-$crictl_version go install "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version"
fi
d=$cache/containerd-$containerd_version
if [[ " $want " = *" containerd2 "* ]] &&
	{ [ ! -x "$d/containerd" ] || [ ! -x "$d/containerd-shim-runc-v2" ] || [ ! -x "$d/ctr" ]; }; then
	echo "cri-deps: building containerd $containerd_version into $d" >&2
	m=github.com/containerd/containerd/v2/cmd
	GOBIN=$d CGO_ENABLED=0 go install "$m/containerd@$containerd_version" \
		"$m/containerd-shim-runc-v2@$containerd_version" "$m/ctr@$containerd_version"
fi
