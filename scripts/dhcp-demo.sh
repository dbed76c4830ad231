#!/usr/bin/env bash
# dhcp-demo.sh: a container gets its address from a real DHCP server through
# bridge + the dhcp IPAM plugin, and gives it back on DEL, without touching
# the real host's network.
#
# Two throwaway network namespaces: a stand-in host with a bridge that
# dnsmasq serves, and a container. The dhcp daemon runs in the stand-in host
# on a socket in a temporary folder, which also holds its lease state and
# dnsmasq's files. The plugins run inside the stand-in host, as a runtime
# would run them on a node. Everything is torn down on exit, even on failure
# or Ctrl-C, and the real host's link count is printed before and after.
#
# Run as root: sudo scripts/dhcp-demo.sh (needs dnsmasq)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=scripts/demo-host.sh
. "$repo/scripts/demo-host.sh"
demo_preflight dhcp-demo.sh
dnsmasq=$(command -v dnsmasq || echo /usr/sbin/dnsmasq)
if [ ! -x "$dnsmasq" ]; then
	echo "dhcp-demo.sh needs dnsmasq (apt-get install dnsmasq-base)" >&2
	exit 1
fi

step() { printf '\n== %s\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

hostns=cniforge-dhcp-host-$$
ctrns=cniforge-dhcp-ctr-$$
tmp=$(mktemp -d /tmp/cniforge-dhcp.XXXXXX)
demo_host_record
dnsmasq_pid='' daemon_pid='' added=false

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	step "tear down"
	$added && plugin DEL >/dev/null 2>&1
	# Stopped by PID: only the processes this script started.
	for pid in $daemon_pid $dnsmasq_pid; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	demo_host_restore "$rc" "$hostns" "$ctrns"
	exit $?
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# within SECONDS COMMAND...: polls COMMAND until it succeeds or SECONDS pass.
within() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.1
	done
}

# plugin VERB: runs bin/bridge with the network config below inside the
# stand-in host, as a runtime would (CNI_PATH finds bin/dhcp).
plugin() {
	ip netns exec "$hostns" env CNI_COMMAND="$1" CNI_CONTAINERID=demo1 CNI_NETNS="/run/netns/$ctrns" \
		CNI_IFNAME=eth0 CNI_PATH="$repo/bin" "$repo/bin/bridge" <"$tmp/net.json"
}

step "build the plugins"
build_user=()
if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
	build_user=(sudo -u "$SUDO_USER" env "PATH=$PATH") # keep bin/ theirs
fi
"${build_user[@]}" ./build_linux.sh

step "a stand-in host ($hostns) whose bridge cnidhcp0 (10.98.0.1/24) dnsmasq serves"
ip netns add "$hostns"
ip netns add "$ctrns"
ip -n "$hostns" link set lo up
show ip -n "$hostns" link add cnidhcp0 type bridge
show ip -n "$hostns" addr add 10.98.0.1/24 dev cnidhcp0
show ip -n "$hostns" link set cnidhcp0 up
ip netns exec "$hostns" "$dnsmasq" --keep-in-foreground --conf-file=/dev/null --port=0 \
	--interface=cnidhcp0 --bind-interfaces --user=root --no-ping --log-dhcp \
	--dhcp-range=10.98.0.10,10.98.0.50,255.255.255.0,2m --dhcp-authoritative \
	--dhcp-leasefile="$tmp/dnsmasq.leases" --pid-file="$tmp/dnsmasq.pid" \
	--log-facility="$tmp/dnsmasq.log" &
dnsmasq_pid=$!
within 10 grep -q 'sockets bound exclusively' "$tmp/dnsmasq.log" 2>/dev/null ||
	{ echo "dnsmasq did not start" >&2; exit 1; }
echo "dnsmasq serves 10.98.0.10-50 on cnidhcp0"

step "the dhcp daemon, in the stand-in host, on $tmp/dhcp.sock"
ip netns exec "$hostns" "$repo/bin/dhcp" daemon -socketpath "$tmp/dhcp.sock" \
	-statedir "$tmp/state" -pidfile "$tmp/dhcp.pid" 2>"$tmp/daemon.log" &
daemon_pid=$!
within 10 test -S "$tmp/dhcp.sock" || { echo "the dhcp daemon did not start:" >&2; cat "$tmp/daemon.log" >&2; exit 1; }

step "ADD: bridge + dhcp"
cat >"$tmp/net.json" <<EOF
{
  "cniVersion": "1.1.0",
  "name": "demo-dhcp",
  "type": "bridge",
  "bridge": "cnidhcp0",
  "ipam": {"type": "dhcp", "daemonSocketPath": "$tmp/dhcp.sock"}
}
EOF
cat "$tmp/net.json"
added=true
plugin ADD | tee "$tmp/result.json"
echo
addr=$(ip -n "$ctrns" -4 -o addr show eth0 | awk '{print $4}')
addr=${addr%/*}
[ -n "$addr" ] || { echo "eth0 in the container has no IPv4 address" >&2; exit 1; }
show ip -n "$ctrns" -4 addr show eth0
show ip -n "$ctrns" route
echo "dnsmasq's lease file:"
show cat "$tmp/dnsmasq.leases"
show ip netns exec "$ctrns" ping -c 1 -W 2 10.98.0.1

step "DEL: the daemon sends a DHCPRELEASE"
plugin DEL
added=false
within 10 bash -c "! grep -q ' $addr ' '$tmp/dnsmasq.leases'" ||
	{ echo "dnsmasq still holds $addr" >&2; exit 1; }
grep "DHCPRELEASE" "$tmp/dnsmasq.log" | sed 's/^/dnsmasq: /'
echo "released: $addr (dnsmasq's lease file no longer has it)"
show ip -n "$ctrns" -br link show
echo "== done"
