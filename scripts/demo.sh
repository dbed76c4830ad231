#!/usr/bin/env bash
# demo.sh: shows cniforge's plugins doing their job through a real CNI runtime
# client (cnitool, pinned in go.mod as a Go tool dependency), without
# touching the real host's network.
#
# It builds the plugins, makes two throwaway network namespaces (a stand-in
# host and a container), and runs cnitool inside the stand-in host, so every
# bridge, veth and route a plugin makes lands there. Network configs,
# host-local's reservations and cnitool's result cache live in a temporary
# folder. Everything is torn down on exit, even on failure or Ctrl-C, and the
# real host's link count is printed before and after to show it untouched.
#
# Run as root: sudo scripts/demo.sh
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=scripts/demo-host.sh
. "$repo/scripts/demo-host.sh"
demo_preflight demo.sh
if ! command -v go >/dev/null 2>&1; then
	echo "demo.sh: no go on PATH; try: sudo env \"PATH=\$PATH\" scripts/demo.sh" >&2
	exit 1
fi

bold='' plain=''
if [ -t 1 ]; then
	bold=$(tput bold 2>/dev/null || true)
	plain=$(tput sgr0 2>/dev/null || true)
fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
show() { printf '%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }

# built PART PLUGIN...: every PLUGIN is in bin/; if not, PART is shown
# as skipped, naming the binaries missing.
built() {
	local part=$1 p missing=()
	shift
	for p in "$@"; do
		[ -x "bin/$p" ] || missing+=("bin/$p")
	done
	[ ${#missing[@]} = 0 ] && return 0
	step "$part: SKIPPED, ${missing[*]} missing (not built yet)"
	return 1
}

# add_shown CONFLIST NET IFNAME [ENV=VALUE...]: print CONFLIST, then ADD
# IFNAME to NET through cnitool (shown); the attachment is remembered, so
# a demo stopped half-way DELs it.
add_shown() {
	local conf=$1 net=$2 ifname=$3
	shift 3
	cat "$conf"
	added+=("$net $ifname")
	show cni add "$net" "$ifname" "$@"
}

# check_then_del_twice NET IFNAME [ENV=VALUE...]: CHECK, then DEL twice
# (a second DEL must succeed too), shown; the attachment is forgotten.
check_then_del_twice() {
	show cni check "$@"
	echo "check: ok"
	show cni del "$@"
	echo "del: ok"
	show cni del "$@"
	echo "second del: ok"
	added=("${added[@]/$1 $2/}")
}

hostns=cniforge-demo-host-$$
ctrns=cniforge-demo-ctr-$$
tmp=$(mktemp -d /tmp/cniforge-demo.XXXXXX)
demo_host_record
added=() # "network ifname" pairs to DEL if the demo stops half-way

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	step "tear down"
	local a
	for a in "${added[@]}"; do
		[ -n "$a" ] || continue
		# shellcheck disable=SC2086 # "network ifname"
		cni del $a >/dev/null 2>&1
	done
	demo_host_restore "$rc" "$hostns" "$ctrns"
	exit $?
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# cni VERB NETWORK IFNAME [ENV=VALUE...]: runs cnitool VERB inside the
# stand-in host. `ip netns exec` gives cnitool a private mount namespace in
# which the result cache it keeps under /var/lib/cni is bind-mounted from the
# demo's temp folder, so nothing is written to the real /var/lib/cni.
cni() {
	local verb=$1 net=$2 ifname=$3
	shift 3
	local cache_src=$tmp/cache cache_dst=/var/lib/cni
	if [ ! -d /var/lib/cni ]; then
		# Nothing to mount over; hide /var/lib (for cnitool and the plugins it
		# runs only) rather than create /var/lib/cni on the real host.
		cache_src=$tmp/varlib
		cache_dst=/var/lib
	fi
	# shellcheck disable=SC2016 # $1.. are the inner bash's arguments
	ip netns exec "$hostns" env NETCONFPATH="$tmp/net.d" CNI_PATH="$repo/bin" CNI_IFNAME="$ifname" "$@" \
		bash -c 'mount --bind "$1" "$2" && exec "$3" "$4" "$5" "$6"' _ \
		"$cache_src" "$cache_dst" "$tmp/cnitool" "$verb" "$net" "/run/netns/$ctrns"
}

step "build the plugins and cnitool"
build_user=()
if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
	# Build as the user who ran sudo, so bin/ and Go's caches stay theirs.
	build_user=(sudo -u "$SUDO_USER" env "PATH=$PATH")
fi
"${build_user[@]}" ./build_linux.sh
"${build_user[@]}" go build -o "$tmp/cnitool" github.com/containernetworking/cni/cnitool
ls bin/
mkdir -p "$tmp/net.d" "$tmp/cache" "$tmp/varlib/cni" "$tmp/host-local"

step "make a stand-in host ($hostns) and a container ($ctrns)"
show ip netns add "$hostns"
show ip netns add "$ctrns"
ip -n "$hostns" link set lo up
echo "the container's lo starts down:"
show ip -n "$ctrns" -br link show lo

# --- loopback -------------------------------------------------------------
step "loopback: ADD through cnitool"
cat >"$tmp/net.d/10-demo-lo.conflist" <<EOF
{
  "cniVersion": "1.1.0",
  "name": "demo-lo",
  "plugins": [{"type": "loopback"}]
}
EOF
add_shown "$tmp/net.d/10-demo-lo.conflist" demo-lo lo
echo
show ip -n "$ctrns" addr show lo
step "loopback: CHECK, STATUS, DEL"
show cni check demo-lo lo
echo "check: ok"
show cni status demo-lo lo
echo "status: ok"
show cni del demo-lo lo
echo "del: ok"
added=("${added[@]/demo-lo lo/}")
show ip -n "$ctrns" -br link show lo
ip -n "$ctrns" link set lo up # the container keeps a working lo for the next part

# --- static ---------------------------------------------------------------
step "static IPAM, run by cnitool on its own (it changes nothing in the kernel)"
cat >"$tmp/net.d/20-demo-static.conflist" <<EOF
{
  "cniVersion": "1.1.0",
  "name": "demo-static",
  "plugins": [{
    "type": "static",
    "capabilities": {"ips": true},
    "ipam": {
      "type": "static",
      "addresses": [{"address": "10.77.0.5/24", "gateway": "10.77.0.1"}, {"address": "fd00:77::5/64"}],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dns": {"nameservers": ["10.77.0.53"], "search": ["demo.test"]}
    }
  }]
}
EOF
cat "$tmp/net.d/20-demo-static.conflist"
echo "the configured addresses:"
show cni add demo-static eth8
echo
echo "addresses the runtime passes per call (capability ips, here CAP_ARGS) replace them:"
show cni add demo-static eth9 CAP_ARGS='{"ips": ["10.77.0.9/24"]}'
echo
show cni del demo-static eth8
show cni del demo-static eth9
echo "del: ok"

# --- macvlan + host-local --------------------------------------------------
if built "macvlan + host-local" macvlan host-local; then
	step "macvlan: a veth in the stand-in host serves as the master's wire"
	# demomaster0 is the master; its peer demowire0, in the same stand-in
	# host, plays the neighbour on the wire at 10.98.0.1.
	show ip -n "$hostns" link add demomaster0 type veth peer name demowire0
	ip -n "$hostns" addr add 10.98.0.1/24 dev demowire0
	ip -n "$hostns" link set demomaster0 up
	ip -n "$hostns" link set demowire0 up
	cat >"$tmp/net.d/25-demo-macvlan.conflist" <<EOF
{
  "cniVersion": "1.1.0",
  "name": "demo-macvlan",
  "plugins": [{
    "type": "macvlan",
    "master": "demomaster0",
    "mode": "bridge",
    "ipam": {
      "type": "host-local",
      "dataDir": "$tmp/host-local",
      "ranges": [[{"subnet": "10.98.0.0/24", "rangeStart": "10.98.0.10", "rangeEnd": "10.98.0.20"}]]
    }
  }]
}
EOF
	add_shown "$tmp/net.d/25-demo-macvlan.conflist" demo-macvlan net1
	echo
	step "the container's macvlan, with a MAC of its own on demomaster0's wire"
	show ip -n "$ctrns" -d link show net1
	show ip -n "$ctrns" addr show net1
	step "the container reaches the neighbour 10.98.0.1 on the master's wire"
	show ip netns exec "$ctrns" ping -c1 -W2 10.98.0.1
	step "macvlan: CHECK, then DEL twice"
	check_then_del_twice demo-macvlan net1
	show ip -n "$ctrns" -br link show
	ip -n "$hostns" link del demomaster0
fi

# --- bridge + host-local ---------------------------------------------------
if built "bridge + host-local" bridge host-local; then
	step "bridge + host-local: ADD through cnitool"
	cat >"$tmp/net.d/30-demo-bridge.conflist" <<EOF
{
  "cniVersion": "1.1.0",
  "name": "demo-bridge",
  "plugins": [{
    "type": "bridge",
    "bridge": "cnidemo0",
    "isGateway": true,
    "ipMasq": false,
    "ipam": {
      "type": "host-local",
      "dataDir": "$tmp/host-local",
      "ranges": [[{"subnet": "10.99.0.0/24"}], [{"subnet": "fd00:99::/64"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
EOF
	add_shown "$tmp/net.d/30-demo-bridge.conflist" demo-bridge eth0
	echo
	step "what the container got"
	show ip -n "$ctrns" addr show eth0
	show ip -n "$ctrns" route show
	show ip -n "$ctrns" -6 route show dev eth0
	step "the stand-in host's side"
	show ip -n "$hostns" -br addr show
	gw=$(ip -n "$hostns" -4 -o addr show dev cnidemo0 | awk '{print $4}' | cut -d/ -f1)
	step "the container reaches its gateway $gw"
	show ip netns exec "$ctrns" ping -c1 -W2 "$gw"
	step "host-local's reservations (upstream's format: one file per address, \"<containerID>\\r\\n<ifname>\")"
	show ls -l "$tmp/host-local/demo-bridge"
	for f in "$tmp"/host-local/demo-bridge/*; do
		case $(basename "$f") in *.*.*.* | *:*) ;; *) continue ;; esac
		printf '%s holds %q\n' "$(basename "$f")" "$(cat "$f")"
	done
	step "bridge + host-local: CHECK, then DEL twice"
	check_then_del_twice demo-bridge eth0
	show ip -n "$ctrns" -br link show
	show ls "$tmp/host-local/demo-bridge"

	# --- portmap, chained after bridge -------------------------------------
	if [ -x bin/portmap ] && command -v python3 >/dev/null; then
		step "bridge + portmap: publish the container's port 80 as the host's 8080"
		cat >"$tmp/net.d/40-demo-pm.conflist" <<EOF
{
  "cniVersion": "1.1.0",
  "name": "demo-pm",
  "plugins": [
    {"type": "bridge", "bridge": "cnidemo1", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "dataDir": "$tmp/host-local", "ranges": [[{"subnet": "10.98.0.0/24"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
		add_shown "$tmp/net.d/40-demo-pm.conflist" demo-pm eth1 CAP_ARGS='{"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}'
		echo
		echo "a listener in the container on port 80:"
		ip netns exec "$ctrns" python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 80)); s.listen(4); s.settimeout(30)
for _ in range(2):
    c, a = s.accept(); c.sendall(b"hello from the container, you are %s\n" % a[0].encode()); c.close()
' &
		listener=$!
		pmget() { # pmget ADDRESS: connect from the stand-in host to ADDRESS:8080
			ip netns exec "$hostns" python3 -c '
import socket, sys, time
for _ in range(50):
    try:
        c = socket.create_connection((sys.argv[1], 8080), timeout=3); break
    except ConnectionRefusedError:
        time.sleep(0.1)  # the listener is still starting
print(c.recv(100).decode(), end="")' "$1"
		}
		gw1=$(ip -n "$hostns" -4 -o addr show dev cnidemo1 | awk '{print $4}' | cut -d/ -f1)
		show pmget "$gw1"
		show pmget 127.0.0.1
		wait "$listener"
		step "the forwarding rules in the stand-in host (nat table, iptables)"
		ip netns exec "$hostns" iptables-save -t nat | grep -E 'CNI-(HOSTPORT|DN)' || true
		echo "DEL gets the same capability arguments as ADD (a runtime passes them to every verb):"
		show cni del demo-pm eth1 CAP_ARGS='{"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}'
		added=("${added[@]/demo-pm eth1/}")
		if ip netns exec "$hostns" iptables-save -t nat | grep -q 'CNI-DN-'; then
			echo "DEL left forwarding rules behind" >&2
			exit 1
		fi
		echo "portmap: ok"
	fi

	step "a leaked attachment, and GC reclaiming it"
	echo "attach again, then let the container die without a DEL (a runtime that crashed):"
	printf '%s$ cni add demo-bridge eth0 >/dev/null%s\n' "$bold" "$plain"
	cni add demo-bridge eth0 >/dev/null
	added+=("demo-bridge eth0")
	show ip netns del "$ctrns"
	echo "the runtime lost its result cache too, so it has nothing left to DEL with:"
	cachedir=$tmp/cache
	[ -d /var/lib/cni ] || cachedir=$tmp/varlib/cni # where cni() mounts it
	show rm "$cachedir"/results/demo-bridge-*
	echo "its addresses stay reserved; upstream host-local has no GC, so they leak for good:"
	show ls "$tmp/host-local/demo-bridge"
	echo "GC with the attachments the runtime still has: none (cnitool sends no list, which"
	echo "means none is valid), so the plugins release everything they hold for demo-bridge:"
	show cni gc demo-bridge eth0
	added=("${added[@]/demo-bridge eth0/}")
	show ls "$tmp/host-local/demo-bridge"
	left=$(find "$tmp/host-local/demo-bridge" -maxdepth 1 -type f \( -name '*.*.*.*' -o -name '*:*' \) -printf '%f ')
	if [ -n "$left" ]; then
		echo "GC left reservations behind: $left" >&2
		exit 1
	fi
	echo "gc: ok"
fi

# --- the full chain: bridge → portmap → bandwidth → tuning → firewall ------
if built "chain bridge → portmap → bandwidth → tuning → firewall" bridge host-local portmap bandwidth tuning firewall; then
	step "chain bridge → portmap → bandwidth → tuning → firewall: ADD through cnitool"
	ip netns add "$ctrns" 2>/dev/null || true # the GC part above removed it
	ip -n "$ctrns" link set dev lo up
	mkdir -p "$tmp/tuning"
	cat >"$tmp/net.d/40-demo-chain.conflist" <<EOF
{
  "cniVersion": "1.1.0",
  "name": "demo-chain",
  "plugins": [
    {"type": "bridge", "bridge": "cnichain0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "dataDir": "$tmp/host-local", "ranges": [[{"subnet": "10.98.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}},
    {"type": "tuning", "dataDir": "$tmp/tuning", "mtu": 1400, "txQLen": 500, "capabilities": {"mac": true},
     "sysctl": {"net.ipv4.conf.IFNAME.arp_filter": "1"}},
    {"type": "firewall", "backend": "iptables"}
  ]
}
EOF
	caps='{"bandwidth": {"ingressRate": 4000000, "ingressBurst": 400000, "egressRate": 8000000, "egressBurst": 800000}, "mac": "02:42:0a:62:00:99", "portMappings": [{"hostPort": 8090, "containerPort": 80, "protocol": "tcp"}]}'
	add_shown "$tmp/net.d/40-demo-chain.conflist" demo-chain eth0 CAP_ARGS="$caps"
	echo
	step "bandwidth: tbf on the host end of the veth (into the container), an ifb with tbf (out of it)"
	show ip netns exec "$hostns" tc qdisc show
	hostveth=$(ip -n "$hostns" -o link show master cnichain0 | awk -F': ' '{print $2}' | cut -d@ -f1)
	show ip netns exec "$hostns" tc filter show dev "$hostveth" ingress
	step "tuning: the MAC, MTU and queue length in the container, and the sysctl; the state file for DEL"
	show ip -n "$ctrns" link show eth0
	show ip netns exec "$ctrns" cat /proc/sys/net/ipv4/conf/eth0/arp_filter
	show ls "$tmp/tuning"
	step "portmap: the host port's DNAT; firewall: the container's address allowed through FORWARD"
	show ip netns exec "$hostns" iptables -t nat -S CNI-HOSTPORT-DNAT
	show ip netns exec "$hostns" iptables -S CNI-FORWARD
	step "chain: CHECK, then DEL twice"
	check_then_del_twice demo-chain eth0 CAP_ARGS="$caps" # a runtime sends the mappings on DEL too
	show ip netns exec "$hostns" iptables -t nat -S CNI-HOSTPORT-DNAT
	show ip -n "$hostns" -br link show
	show ls "$tmp/tuning"
fi

step "done"
