// Package attach is the frame every plugin that makes or changes an
// attachment runs on, so that a plugin is its config and its own kernel
// steps. The frame owns what bridge and ptp used to write by hand:
//
//   - the common config (NetConf: name, cniVersion, ipam, dns, stdin) and
//     the shared keys, validated one way (Masq for ipMasq/ipMasqBackend,
//     ValidateMTU for mtu); prevResult is parsed only where a verb needs it
//     (NetConf.Prev), never by DEL;
//   - the Attachment: args, logger, host namespace and handle, container
//     namespace and handle opened on demand behind the own-namespace guard
//     (a CNI_NETNS that is the plugin's own namespace is refused, code 8,
//     before any change), the undo stack, the owner (pkg/owner) and alias;
//   - one ADD runner: parse, IPAM type found in CNI_PATH (else code 7),
//     open, run the steps with the undo stack, recover a panic into code
//     999 (stack to stderr only), roll back on error or panic, print the
//     result in the requested version; one failure-injection hook
//     (Hooks.AfterStep) at every Attachment.Step;
//   - IPAMAdd, which pushes the release and validates the result;
//   - a best-effort DEL that runs independent steps and joins their errors
//     (masquerade of both backends, the plugin's own steps, IPAM last;
//     dhcp, which sends its RELEASE on the container interface, before
//     the plugin's own steps);
//   - CHECK: prevResult required (code 7), IPAM CHECK, then the plugin's
//     comparisons with the CHECK kit (CheckLink, CheckPeers, CheckMaster,
//     CheckMAC, CheckAddrs, CheckRoutes);
//   - GC (the list validated by result.GCAttachments; IPAM, masquerade and
//     the plugin's own state) and STATUS forwarded to IPAM; both run with
//     nothing but CNI_COMMAND and CNI_PATH set.
//
// Masquerade is not the frame's own: it links no netfilter code, so that a
// plugin without masquerade (loopback, the link plugins, tuning,
// bandwidth) links none. A plugin whose config embeds Masq passes
// pkg/attach/masquerade's Frame in Plugin.Masq (its first command fails
// with code 999 without it: DEL would leave the rules); the frame then
// tears the rules down on DEL, collects them on GC and probes the backend
// on STATUS, and the plugin's ADD and CHECK call masquerade.Start (or
// Prepare) and masquerade.Check.
//
// Nor is IPAM delegation (pkg/ipam: exec of the delegate, its early start,
// cni's invoke): a plugin that takes its addresses from an IPAM plugin
// passes pkg/ipam's Frame in Plugin.IPAM, and the frame's IPAM steps above
// run only for it. A plugin without it (loopback, tuning, sbr, vrf,
// bandwidth, portmap, firewall) ignores an "ipam" key, as upstream's do,
// and links none of it.
//
// A plugin written on it (a sketch of a dummy-link plugin):
//
//	type netConf struct {
//		attach.NetConf
//		MTU int `json:"mtu"`
//	}
//
//	var frame = attach.Plugin[*netConf]{
//		Name:    "dummy",
//		Summary: "a dummy link in the container",
//		Parse: func(args *skel.CmdArgs) (*netConf, error) {
//			c := &netConf{}
//			if err := attach.Decode(args.StdinData, c); err != nil {
//				return nil, err
//			}
//			return c, attach.ValidateMTU(c.MTU)
//		},
//		Add: func(a *attach.Attachment, c *netConf) (types.Result, error) {
//			// The link first, up, then IPAM (upstream's order: the dhcp
//			// IPAM plugin leases on the container interface).
//			contNS, contH, _ := a.Container() // opened and guarded by the runner
//			if err := addDummy(contH, a.Args.IfName, c.MTU); err != nil {
//				return nil, fmt.Errorf("in %s: %w", contNS.Path(), err)
//			}
//			a.Undo.Push("delete "+a.Args.IfName, func() error { return ip.DelLinkByName(contH, a.Args.IfName) })
//			if err := a.Step("link"); err != nil {
//				return nil, err
//			}
//			res, err := a.IPAMAdd() // release pushed onto a.Undo
//			if err != nil {
//				return nil, err
//			}
//			...
//			return res, nil
//		},
//		Del: func(a *attach.Attachment, c *netConf) []error {
//			return []error{deleteDummy(a.Args.Netns, a.Args.IfName)}
//		},
//		Check: func(a *attach.Attachment, c *netConf, prev *current.Result) error {
//			contNS, contH, _ := a.Container()
//			_, ipcs, err := a.ContainerIface(prev)
//			if err != nil {
//				return err
//			}
//			l, err := attach.CheckLink(contNS, contH, a.Args.IfName, "dummy", true)
//			if err != nil {
//				return err
//			}
//			return attach.CheckAddrs(contNS, contH, l, ipcs)
//		},
//	}
//
//	// Plugin is the descriptor cmd/dummy hands to plugin.Main.
//	var Plugin = frame.Descriptor(attach.Hooks{})
package attach
