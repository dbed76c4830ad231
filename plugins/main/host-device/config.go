package hostdevice

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/result"
)

// netConf is host-device's config. Keys are upstream's.
type netConf struct {
	attach.NetConf
	// Exactly one of these picks the device in the host namespace.
	Device     string `json:"device,omitempty"`     // its name
	HWAddr     string `json:"hwaddr,omitempty"`     // its MAC
	KernelPath string `json:"kernelpath,omitempty"` // its sysfs device path, /sys/devices/...
	PCIAddr    string `json:"pciBusID,omitempty"`   // its PCI address, 0000:00:1f.6

	RuntimeConfig struct {
		// DeviceID (capability "deviceID", from a device plugin): a PCI
		// address or an auxiliary-bus device name.
		DeviceID string `json:"deviceID,omitempty"`
	} `json:"runtimeConfig"`
}

// selector says how the device is picked: by which key, with what value.
type selector struct {
	key   string // "device", "hwaddr", "kernelpath", "pciBusID", "runtimeConfig.deviceID"
	value string
	mac   net.HardwareAddr // hwaddr, parsed
}

// byPCI reports whether the selector names a PCI device (whose driver may
// be a userspace one).
func (s selector) byPCI() bool {
	return s.key == keyPCI || (s.key == keyDeviceID && pciAddrRE().MatchString(s.value))
}

const (
	keyDevice     = "device"
	keyHWAddr     = "hwaddr"
	keyKernelPath = "kernelpath"
	keyPCI        = "pciBusID"
	keyDeviceID   = "runtimeConfig.deviceID"
)

// config is a validated netConf with its selector.
type config struct {
	netConf
	sel selector
	// unused are the other selectors given, which sel takes precedence
	// over; ADD logs them.
	unused []selector
}

// pciAddrRE is a PCI address: domain:bus:device.function. It compiles on
// first use: the multicall binary runs every plugin's package init on
// every exec of any plugin, and most never look at a PCI address.
var pciAddrRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)
})

func parse(args *skel.CmdArgs) (*config, error) { return parseConfig(args.StdinData) }

// parseConfig decodes and validates stdin, the same way for every command.
// It touches no kernel state and no files. No selector is code 7; of
// several, upstream's precedence picks one (loadConf's handleDeviceID,
// then getLink): device, hwaddr, kernelpath, then runtimeConfig.deviceID,
// which replaces pciBusID (a device plugin's pick over the config's). Each
// one given must be well formed, picked or not.
func parseConfig(stdin []byte) (*config, error) {
	c := &config{}
	if err := attach.Decode(stdin, &c.netConf); err != nil {
		return nil, err
	}
	var set []selector
	for _, s := range []selector{
		{key: keyDevice, value: c.Device},
		{key: keyHWAddr, value: c.HWAddr},
		{key: keyKernelPath, value: c.KernelPath},
		{key: keyDeviceID, value: c.RuntimeConfig.DeviceID},
		{key: keyPCI, value: c.PCIAddr},
	} {
		if s.value == "" {
			continue
		}
		if err := validateSelector(&s); err != nil {
			return nil, result.InvalidConfig(err)
		}
		set = append(set, s)
	}
	if len(set) == 0 {
		return nil, result.InvalidConfig(errors.New(`specify one of "device", "hwaddr", "kernelpath", "pciBusID" or runtimeConfig "deviceID"`))
	}
	c.sel, c.unused = set[0], set[1:]
	return c, nil
}

func validateSelector(s *selector) error {
	switch s.key {
	case keyDevice:
		return attach.ValidateIfName(keyDevice, s.value)
	case keyHWAddr:
		mac, err := net.ParseMAC(s.value)
		if err != nil {
			return fmt.Errorf("hwaddr: %q: %w", s.value, err)
		}
		s.mac = mac
	case keyKernelPath:
		clean := filepath.Clean(s.value)
		if !filepath.IsAbs(s.value) || !strings.HasPrefix(clean, "/sys/devices/") || clean != strings.TrimRight(s.value, "/") {
			return fmt.Errorf("kernelpath: %q must be a clean absolute path under /sys/devices/", s.value)
		}
	case keyPCI:
		if !pciAddrRE().MatchString(s.value) {
			return fmt.Errorf("pciBusID: %q is not a PCI address (0000:00:00.0)", s.value)
		}
	case keyDeviceID:
		// A PCI address, or an auxiliary-bus device ("mlx5_core.sf.4"):
		// either way one sysfs file name.
		if !pciAddrRE().MatchString(s.value) && !auxNameRE().MatchString(s.value) {
			return fmt.Errorf("runtimeConfig.deviceID: %q is neither a PCI address nor an auxiliary device name", s.value)
		}
	}
	return nil
}

// auxNameRE is an auxiliary-bus device name: <module>.<device>.<id>
// (compiled on first use, as pciAddrRE).
var auxNameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$`)
})
