package plugin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cniforge/plugins/pkg/result"
)

// maxNameBytes is the longest file name Linux file systems take (NAME_MAX).
const maxNameBytes = 255

// precheck refuses, before skel's own checks, what skel refuses with a
// message that names neither the variable nor the value: a CNI_IFNAME or
// CNI_CONTAINERID it cannot use ("interface name is too long"), and a
// cniVersion the plugin does not support (for CHECK, skel says only "plugin
// version does not allow CHECK"). The codes are skel's: 4 for the
// variables, 1 for the version. It also refuses (code 7) a network name
// longer than a file name, which skel lets through. Everything else is left to skel, so a nil
// return changes nothing.
func precheck(vi version.PluginInfo, getenv func(string) string, stdin []byte) *types.Error {
	_, err := precheckConf(vi, getenv, stdin)
	return err
}

// stdinConf is what the frame reads of a config before the plugin does:
// its version (as skel reads it: "0.1.0" when absent) and name. A nil
// *stdinConf means the config was not decoded (not a command that reads
// one, or not JSON): skel's own checks then report it.
type stdinConf struct {
	version, name string
}

// precheckConf is precheck, returning also the config it decoded.
func precheckConf(vi version.PluginInfo, getenv func(string) string, stdin []byte) (*stdinConf, *types.Error) {
	cmd := getenv("CNI_COMMAND")
	switch cmd {
	case "ADD", "CHECK", "DEL":
		if id := getenv("CNI_CONTAINERID"); id != "" {
			if err := utils.ValidateContainerID(id); err != nil {
				return nil, types.NewError(err.Code, fmt.Sprintf("CNI_CONTAINERID: %q: %s (letters, digits, '_', '.' and '-', not first)", id, err.Msg), err.Details)
			}
		}
		if name := getenv("CNI_IFNAME"); name != "" {
			if err := utils.ValidateInterfaceName(name); err != nil {
				return nil, types.NewError(err.Code, fmt.Sprintf("CNI_IFNAME: %q: %s", name, err.Msg), err.Details)
			}
		}
	case "GC", "STATUS":
	default:
		return nil, nil
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
	}
	if err := result.DecodeConfig(stdin, &conf); err != nil {
		if result.Code(err) == types.ErrInvalidNetworkConfig {
			// skel would answer a wrong type with code 6 and a Go type name.
			return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
		}
		return nil, nil // not JSON: skel reports it (code 6)
	}
	// skel checks the name's characters, not its length: one longer than
	// a file name may be cannot name host-local's folder, nor the dhcp
	// daemon's lease files.
	if len(conf.Name) > maxNameBytes {
		return nil, types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("name: %d bytes, longer than a file name may be (%d)", len(conf.Name), maxNameBytes), "")
	}
	ver := conf.CNIVersion
	if ver == "" {
		ver = "0.1.0" // the spec's default, as skel reads it
	}
	if supported := vi.SupportedVersions(); !slices.Contains(supported, ver) {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion,
			fmt.Sprintf("cniVersion: %q is not a version this plugin supports (%s)", conf.CNIVersion, strings.Join(supported, ", ")), "")
	}
	return &stdinConf{version: ver, name: conf.Name}, nil
}
