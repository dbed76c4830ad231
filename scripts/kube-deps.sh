#!/usr/bin/env bash
# kube-deps.sh — builds what the Kubernetes lane (scripts/kube-lane.sh)
# needs and Debian does not ship, once, into .cache/kube/ (reused by later
# runs):
#
#   .cache/kube/v1.34.4/{kube-apiserver,kube-controller-manager,
#                        kube-scheduler,kubelet,kube-proxy,kubectl}
#   .cache/kube/etcd-v3.6.8/etcd
#   .cache/kube/multus-v4.2.2/multus (the thin plugin)
#
# containerd 2.x and crictl come from scripts/cri-deps.sh. Prints nothing
# when everything is already built; needs Go and the network (the module
# proxy) otherwise. The Kubernetes build takes about ten minutes on two
# cores.
#
# Kubernetes from the module proxy: k8s.io/kubernetes's go.mod replaces
# every k8s.io/* staging module with ./staging/src/k8s.io/*, which the
# module zip does not carry; the replaces are pointed at the published
# staging modules of the same release (k8s.io/api v0.34.4, ...). etcd: a
# tiny module whose main is etcdmain.Main, the etcd server's own.
set -euo pipefail
cd "$(dirname "$0")/.."

k8s_version=v1.34.4
staging_version=v0.${k8s_version#v1.}
etcd_version=v3.6.8
cache=$PWD/.cache/kube
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"

kbin=$cache/$k8s_version
cmds="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"
missing=
for c in $cmds; do
	[ -x "$kbin/$c" ] || missing=1
done
if [ -n "$missing" ]; then
	echo "kube-deps: building Kubernetes $k8s_version into $kbin" >&2
	dir=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$k8s_version" | jq -r .Dir)
	src=$cache/src-$k8s_version
	rm -rf "$src"
	mkdir -p "$cache"
	cp -r "$dir" "$src"
	chmod -R u+w "$src"
	sed -i -E 's#(k8s.io/[a-z0-9-]+) => ./staging/src/k8s.io/[a-z0-9-]+#\1 => \1 '"$staging_version"'#' "$src/go.mod"
	mkdir -p "$kbin.tmp"
	(
		cd "$src"
		pkgs=
		for c in $cmds; do
			pkgs+=" ./cmd/$c"
		done
		# shellcheck disable=SC2086 # one word per package
		GOWORK=off GOFLAGS="$GOFLAGS -mod=mod" CGO_ENABLED=0 go build -o "$kbin.tmp/" $pkgs
	)
	rm -rf "$kbin" "$src"
	mv "$kbin.tmp" "$kbin"
fi

e=$cache/etcd-$etcd_version
if [ ! -x "$e/etcd" ]; then
	echo "kube-deps: building etcd $etcd_version into $e" >&2
	src=$cache/src-etcd-$etcd_version
	rm -rf "$src"
	mkdir -p "$src"
	cat >"$src/main.go" <<-'EOF'
		package main

		import (
			"os"

			"go.etcd.io/etcd/server/v3/etcdmain"
		)

		func main() { etcdmain.Main(os.Args) }
	EOF
	(
		cd "$src"
		GOWORK=off go mod init cniforge-lane/etcd >/dev/null 2>&1
		GOWORK=off GOFLAGS="$GOFLAGS -mod=mod" go get "go.etcd.io/etcd/server/v3@$etcd_version" >/dev/null 2>&1
		GOWORK=off GOFLAGS="$GOFLAGS -mod=mod" CGO_ENABLED=0 go build -o "$e.tmp/etcd" .
	)
	rm -rf "$e" "$src"
	mv "$e.tmp" "$e"
fi

# Multus (the thin plugin) for the lane's multus stage: the module from the
# proxy (`go install` is refused: the proxy serves no version list for
# gopkg.in/k8snetworkplumbingwg/multus-cni.v4), its vendor/ removed so the
# build resolves the modules its go.mod names.
multus_version=v4.2.2
m=$cache/multus-$multus_version
if [ ! -x "$m/multus" ]; then
	echo "kube-deps: building Multus $multus_version into $m" >&2
	dir=$(GOFLAGS=-mod=mod go mod download -json "gopkg.in/k8snetworkplumbingwg/multus-cni.v4@$multus_version" | jq -r .Dir)
	src=$cache/src-multus-$multus_version
	rm -rf "$src"
	cp -r "$dir" "$src"
	chmod -R u+w "$src"
	rm -rf "$src/vendor"
	(
		cd "$src"
		GOWORK=off GOFLAGS="$GOFLAGS -mod=mod" CGO_ENABLED=0 go build -o "$m.tmp/multus" ./cmd/multus
	)
	rm -rf "$m" "$src"
	mv "$m.tmp" "$m"
fi
