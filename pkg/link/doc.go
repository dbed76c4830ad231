// Package link holds what the plugins that give a container a link other
// than a veth (macvlan, ipvlan, vlan, dummy, tap, host-device) share, so
// that none of them writes it again:
//
//   - PickMAC: the container MAC from runtimeConfig.mac (capability "mac"),
//     then args.cni.mac, then CNI_ARGS MAC, then the config's "mac" key
//     (bridge uses it too, without a "mac" key). Pure.
//   - Layer3: "ipam" absent or {} means layer 2 only. Pure.
//   - ResolveMasterOf (ResolveMaster, CheckMasterMTU): the master link in
//     the host or, with linkInContainer, the container namespace (the
//     default route's interface when the config names none) and the MTU
//     bound, code 7 naming the interface and the numbers. Read-only.
//   - Create: make a link under a random temporary name in the namespace
//     its master lives in, move it into the container when that is another
//     namespace, rename it to CNI_IFNAME there. A failure deletes what it
//     made, so the caller pushes its undo only after success.
//   - Finish: the tail of ADD: arp_notify/ndisc_notify, the IPAM
//     addresses (no DAD wait), up (the kernel announces the IPv4
//     addresses), routes, and the result (the interface with sandbox and
//     MAC, every IP pointing at it).
//   - Add: the whole ADD after the master is resolved, in upstream's
//     order: Create, its undo (step "link"), then IPAM (step "ipam": the
//     dhcp daemon leases on the container interface, so for dhcp the link
//     is up before it), then Finish (step "configure").
//   - Configure: the tail of ADD once the link is CNI_IFNAME in the
//     container (addresses, step "ipam", Finish, step "configure"): Add's,
//     tap's and host-device's (ip.CheckNameFree first: CNI_IFNAME is free there).
//   - Plugin: the descriptor of a plugin whose attachment is one such link
//     (macvlan, ipvlan, vlan, dummy): ADD its own (ending in Add), DEL
//     DeleteOwned on a config decoded without validation, then IPAM.
//   - CheckAttachment: CHECK's prevResult interface, master and Check.
//   - Check: CHECK of such a link: kind, mode, master, MAC, MTU, up,
//     addresses and routes, each error naming the link and the namespace.
//   - DeleteOwned: DEL of such a link: only a link of the plugin's kind,
//     tagged with the attachment's alias (or untagged: an upstream ADD tags
//     nothing); a namespace or link that is gone is success.
//
// Functions taking a *netlink.Handle work in the namespace it is bound to;
// those taking a *ns.NetNS say which namespace they enter.
package link
