package hostdevice

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cniforge/plugins/pkg/result"
)

// userspaceDrivers are the PCI drivers that hand a device to userspace
// (DPDK and the like): such a device has no netdev to move.
var userspaceDrivers = []string{"vfio-pci", "uio_pci_generic", "igb_uio"}

// sysfsDevice is what sysfs says about the device a selector names.
type sysfsDevice struct {
	// names are the netdevs under the device's net/ folder, sorted.
	names []string
	// userspaceDriver is the driver's name when the PCI device is bound to
	// a userspace driver; names is then empty.
	userspaceDriver string
}

// readSysfs resolves a kernelpath, pciBusID or runtimeConfig.deviceID
// selector through the sysfs tree at root ("/sys" in production): the
// netdevs under <device>/net (for a virtio PCI device, under
// <device>/virtio*/net), or the userspace driver a PCI device is bound to.
// A device that is missing or has no netdev is a config error (7) naming
// the key, the value and the folder looked in.
func readSysfs(root string, s selector) (sysfsDevice, error) {
	var dev string
	switch {
	case s.key == keyKernelPath:
		dev = filepath.Join(root, strings.TrimPrefix(s.value, "/sys"))
	case s.byPCI():
		dev = filepath.Join(root, "bus/pci/devices", s.value)
	case s.key == keyDeviceID:
		dev = filepath.Join(root, "bus/auxiliary/devices", s.value)
	default:
		return sysfsDevice{}, fmt.Errorf("%s is not resolved through sysfs", s.key)
	}
	if _, err := os.Stat(dev); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return sysfsDevice{}, result.InvalidConfig(fmt.Errorf("%s: %q: no device at %s", s.key, s.value, dev))
		}
		return sysfsDevice{}, fmt.Errorf("%s: %q: %w", s.key, s.value, err)
	}
	if s.byPCI() {
		if drv, err := os.Readlink(filepath.Join(dev, "driver")); err == nil {
			if d := filepath.Base(drv); slices.Contains(userspaceDrivers, d) {
				return sysfsDevice{userspaceDriver: d}, nil
			}
		}
	}
	netDir := filepath.Join(dev, "net")
	if _, err := os.Stat(netDir); errors.Is(err, os.ErrNotExist) && s.byPCI() {
		// A virtio-net device keeps its netdev one level down.
		if m, _ := filepath.Glob(filepath.Join(dev, "virtio*", "net")); len(m) > 0 { // the pattern is valid
			netDir = m[0]
		}
	}
	entries, err := os.ReadDir(netDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return sysfsDevice{}, fmt.Errorf("%s: %q: %w", s.key, s.value, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		return sysfsDevice{}, result.InvalidConfig(fmt.Errorf("%s: %q: no network interface under %s", s.key, s.value, netDir))
	}
	return sysfsDevice{names: names}, nil
}
