package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"
)

// outputs maps the CmdArgs of a command running in-process (RunInProcess)
// to the writer that stands for its stdout.
var outputs sync.Map // *skel.CmdArgs → io.Writer

// Stdout is where the command given args prints its result: os.Stdout in a
// plugin process, the caller's buffer when pkg/ipam runs the plugin inside
// the process of the plugin that delegates to it. A plugin whose descriptor
// sets InProcess prints only here.
func Stdout(args *skel.CmdArgs) io.Writer {
	if w, ok := outputs.Load(args); ok {
		return w.(io.Writer)
	}
	return os.Stdout
}

// RunInProcess runs p as an exec of its binary would, without the exec:
// environ is the child's whole environment (the CNI_* variables are read
// from it, never from this process's own), stdin its standard input. What
// the child would print on stdout (its result, or its CNI error JSON) is
// returned, and the error is that CNI error, as skel would have reported it
// and exited 1. Diagnostics go to stderr, as the child's would.
//
// The checks and their order are skel's (github.com/containernetworking/cni
// v1.3.0 pkg/skel): required variables per command, container ID and
// interface name syntax, the network name, the config's version against
// p.Versions, CHECK/GC/STATUS minimum versions. That CNI_NETNS is not the
// caller's own namespace, which skel checks after ADD and DEL, is checked
// before them (SkelFuncs). A panic in the plugin ends only this call, as a
// crashed child would: an error, no result. A plugin process runs the same
// checks (runProcess).
func (p Plugin) RunInProcess(environ []string, stdin []byte, stderr io.Writer) (stdout []byte, err error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v // the last one wins, as in the exec'd child's getenv
		}
	}
	var out bytes.Buffer
	d := dispatch{getenv: func(k string) string { return env[k] }, stdin: stdin, stdout: &out, stderr: stderr}
	cniErr, panicked := d.run(p)
	if panicked != "" {
		fmt.Fprint(stderr, panicked)
		return nil, &types.Error{Msg: fmt.Sprintf("netplugin failed: %q", panicked)}
	}
	if cniErr == nil {
		return out.Bytes(), nil
	}
	// skel prints the error after whatever the command printed; the
	// exec'ing side (invoke.RawExec) then parses all of stdout as the error.
	b, mErr := json.MarshalIndent(cniErr, "", "    ")
	if mErr != nil {
		return nil, &types.Error{Msg: fmt.Sprintf("netplugin failed with no error message: %v", mErr)}
	}
	out.Write(b)
	var parsed types.Error
	if jErr := json.Unmarshal(out.Bytes(), &parsed); jErr != nil {
		parsed = types.Error{Msg: fmt.Sprintf("netplugin failed but error parsing its diagnostic message %q: %v", out.String(), jErr)}
	}
	return nil, &parsed
}

type dispatch struct {
	getenv func(string) string
	stdin  []byte
	stdout io.Writer
	stderr io.Writer
}

func (d dispatch) run(p Plugin) (cniErr *types.Error, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprintf("panic: %v\n\n%s", r, debug.Stack())
		}
	}()
	return d.main(p), ""
}

// envVar is one CNI_* variable: the commands that require it and the
// syntax check skel applies when it is required.
type envVar struct {
	name     string
	required []string
	validate func(string) *types.Error
}

var cniEnv = []envVar{
	{"CNI_COMMAND", []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}, nil},
	{"CNI_CONTAINERID", []string{"ADD", "CHECK", "DEL"}, utils.ValidateContainerID},
	{"CNI_NETNS", []string{"ADD", "CHECK"}, nil},
	{"CNI_IFNAME", []string{"ADD", "CHECK", "DEL"}, utils.ValidateInterfaceName},
	{"CNI_ARGS", nil, nil},
	{"CNI_PATH", []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}, nil},
	{"CNI_NETNS_OVERRIDE", nil, nil},
}

// cmdArgs is skel's reading of the environment and stdin; conf is what
// precheck decoded of stdin (nil: not decoded, so decode it here).
func (d dispatch) cmdArgs(conf *stdinConf) (string, *skel.CmdArgs, *types.Error) {
	cmd := d.getenv("CNI_COMMAND")
	var missing []string
	for _, v := range cniEnv {
		val := d.getenv(v.name)
		req := contains(v.required, cmd)
		switch {
		case val == "" && (req || v.name == "CNI_COMMAND"):
			missing = append(missing, v.name)
		case val != "" && req && v.validate != nil:
			if err := v.validate(val); err != nil {
				return "", nil, err
			}
		}
	}
	if len(missing) > 0 {
		return "", nil, types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("required env variables [%s] missing", strings.Join(missing, ",")), "")
	}
	stdin := d.stdin
	switch {
	case cmd == "VERSION":
		stdin = []byte{}
	case conf != nil:
		if conf.name == "" {
			return "", nil, types.NewError(types.ErrInvalidNetworkConfig, "missing network name", "")
		}
		if err := utils.ValidateNetworkName(conf.name); err != nil {
			return "", nil, err
		}
	default:
		if err := validateNetworkName(stdin); err != nil {
			return "", nil, err
		}
	}
	return cmd, &skel.CmdArgs{
		ContainerID:   d.getenv("CNI_CONTAINERID"),
		Netns:         d.getenv("CNI_NETNS"),
		IfName:        d.getenv("CNI_IFNAME"),
		Args:          d.getenv("CNI_ARGS"),
		Path:          d.getenv("CNI_PATH"),
		NetnsOverride: d.getenv("CNI_NETNS_OVERRIDE"),
		StdinData:     stdin,
	}, nil
}

func validateNetworkName(stdin []byte) *types.Error {
	var conf struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("error unmarshall network config: %v", err), "")
	}
	if conf.Name == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, "missing network name", "")
	}
	return utils.ValidateNetworkName(conf.Name)
}

func (d dispatch) main(p Plugin) *types.Error {
	conf, err := precheckConf(p.Versions, d.getenv, d.stdin)
	if err != nil {
		return err
	}
	cmd, args, err := d.cmdArgs(conf)
	if err != nil {
		if err.Code == types.ErrInvalidEnvironmentVariables && d.getenv("CNI_COMMAND") == "" {
			fmt.Fprintln(d.stderr, p.About())
			fmt.Fprintf(d.stderr, "CNI protocol versions supported: %s\n", strings.Join(p.Versions.SupportedVersions(), ", "))
			return nil
		}
		return err
	}
	outputs.Store(args, d.stdout)
	defer outputs.Delete(args)

	funcs := p.SkelFuncs()
	switch cmd {
	case "ADD":
		return call(conf, args, p.Versions, funcs.Add)
	case "DEL":
		return call(conf, args, p.Versions, funcs.Del)
	case "CHECK":
		return callSince("0.4.0", cmd, conf, args, p.Versions, funcs.Check)
	case "GC":
		return callSince("1.1.0", cmd, conf, args, p.Versions, funcs.GC)
	case "STATUS":
		return callSince("1.1.0", cmd, conf, args, p.Versions, funcs.Status)
	case "VERSION":
		if err := p.Versions.Encode(d.stdout); err != nil {
			return types.NewError(types.ErrIOFailure, err.Error(), "")
		}
		return nil
	}
	return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND: %v", cmd), "")
}

// callSince is CHECK, GC and STATUS: refused for a config older than min,
// or newer than every version the plugin supports.
func callSince(min, cmd string, conf *stdinConf, args *skel.CmdArgs, vi version.PluginInfo, fn func(*skel.CmdArgs) error) *types.Error {
	confVer, cniErr := configVersion(conf, args)
	if cniErr != nil {
		return cniErr
	}
	ok, err := version.GreaterThanOrEqualTo(confVer, min)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if !ok {
		return types.NewError(types.ErrIncompatibleCNIVersion, "config version does not allow "+cmd, "")
	}
	for _, pv := range vi.SupportedVersions() {
		ok, err := version.GreaterThanOrEqualTo(pv, confVer)
		if err != nil {
			return types.NewError(types.ErrDecodingFailure, err.Error(), "")
		}
		if ok {
			return call(conf, args, vi, fn)
		}
	}
	return types.NewError(types.ErrIncompatibleCNIVersion, "plugin version does not allow "+cmd, "")
}

// configVersion is the config's cniVersion, as skel decodes it.
func configVersion(conf *stdinConf, args *skel.CmdArgs) (string, *types.Error) {
	if conf != nil {
		return conf.version, nil
	}
	v, err := (&version.ConfigDecoder{}).Decode(args.StdinData)
	if err != nil {
		return "", types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	return v, nil
}

// call checks the config's version against the plugin's, then runs fn.
func call(conf *stdinConf, args *skel.CmdArgs, vi version.PluginInfo, fn func(*skel.CmdArgs) error) *types.Error {
	confVer, err := configVersion(conf, args)
	if err != nil {
		return err
	}
	if verErr := (&version.Reconciler{}).Check(confVer, vi); verErr != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI versions", verErr.Details())
	}
	if fn == nil {
		return nil
	}
	if err := fn(args); err != nil {
		var e *types.Error
		if errors.As(err, &e) {
			return e
		}
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
