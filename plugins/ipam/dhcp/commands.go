package dhcp

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/gobrpc"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// handshakeTimeout bounds connecting to the daemon: a process that holds
// the socket but does not answer must not hang the runtime's command.
const handshakeTimeout = 10 * time.Second

// dial connects to the daemon as rpc.DialHTTP does (upstream's plugin
// uses that), with a deadline on the connect and the HTTP CONNECT
// handshake. The handshake proves a daemon answers: a socket file left by
// a killed daemon refuses the connection.
func dial(conf *Config) (*gobrpc.Client, error) {
	fail := func(err error) (*gobrpc.Client, error) {
		return nil, fmt.Errorf("no dhcp daemon answers on %s (start it with `dhcp daemon -socketpath %s`): %w",
			conf.SocketPath, conf.SocketPath, err)
	}
	conn, err := net.DialTimeout("unix", conf.SocketPath, handshakeTimeout)
	if err != nil {
		return fail(err)
	}
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout)) // a unix socket always takes a deadline
	c, err := gobrpc.NewClient(conn)
	if err != nil {
		conn.Close()
		return fail(err)
	}
	_ = conn.SetDeadline(time.Time{}) // an ADD may take up to the daemon's -resendtimeout
	return c, nil
}

// call makes one call on a connection of its own.
func call(conf *Config, method string, args *skel.CmdArgs, reply any) error {
	c, err := dial(conf)
	if err != nil {
		return result.TryAgainLater(err)
	}
	defer c.Close()
	// The daemon reads the netconf from StdinData; Path is the plugin's
	// search path, which it does not need.
	if err := c.Call("DHCP."+method, args, reply); err != nil {
		var se gobrpc.ServerError
		if errors.As(err, &se) {
			return fmt.Errorf("dhcp daemon on %s: %s", conf.SocketPath, string(se))
		}
		return result.TryAgainLater(fmt.Errorf("dhcp daemon on %s: %w", conf.SocketPath, err))
	}
	return nil
}

func cmdAdd(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if args.Netns == "" {
		return result.InvalidEnv(errors.New("CNI_NETNS: missing"))
	}
	res := &current.Result{}
	if err := call(conf, "Allocate", args, res); err != nil {
		return err
	}
	res.CNIVersion = current.ImplementedSpecVersion
	return result.Print(res, conf.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	conf, err := parseReleaseConfig(args.StdinData)
	if err != nil {
		return err
	}
	return call(conf, "Release", args, &struct{}{})
}

// cmdCheck fails unless the daemon holds a live lease for the attachment
// and its address is on the interface.
func cmdCheck(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	res := &current.Result{}
	if err := call(conf, "Check", args, res); err != nil {
		return err
	}
	n, h, err := ns.OpenContainer(args.Netns)
	if err != nil {
		return err
	}
	defer n.Close()
	defer h.Close()
	link, err := h.LinkByName(args.IfName)
	if err != nil {
		return fmt.Errorf("interface %q in %s: %w", args.IfName, args.Netns, err)
	}
	addrs, err := h.AddrList(link, 0)
	if err != nil {
		return fmt.Errorf("addresses of %q in %s: %w", args.IfName, args.Netns, err)
	}
	have := make([]net.IPNet, 0, len(addrs))
	for _, a := range addrs {
		have = append(have, *a.IPNet)
	}
	return result.CheckAddrs(args.IfName, res.IPs, have)
}

func cmdGC(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if _, err := result.GCAttachments(args.StdinData); err != nil {
		return err // refuse a malformed list here, with its code
	}
	return call(conf, "GC", args, &struct{}{})
}

// cmdStatus fails with code 50 when no daemon answers on the socket.
func cmdStatus(args *skel.CmdArgs) error {
	conf, err := parseConfig(args.StdinData)
	if err != nil {
		return err
	}
	c, err := dial(conf)
	if err != nil {
		return result.Unavailable(err)
	}
	return c.Close()
}
