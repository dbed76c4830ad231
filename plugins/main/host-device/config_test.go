package hostdevice_test

import (
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/result"
	"github.com/cniforge/plugins/pkg/testutil"
	hostdevice "github.com/cniforge/plugins/plugins/main/host-device"
)

func wrap(keys string) []byte {
	return testutil.JoinConf(`"cniVersion": "1.0.0", "name": "n", "type": "host-device"`, keys, nil)
}

var _ = Describe("parseConfig", func() {
	// Of several, upstream's precedence: its loadConf lets
	// runtimeConfig.deviceID replace pciBusID, and its getLink tries
	// device, hwaddr, kernelpath, then the PCI address.
	DescribeTable("picks the selector, of several by upstream's precedence",
		func(keys, wantKey, wantValue string) {
			c, err := hostdevice.ParseConfig(wrap(keys))
			Expect(err).NotTo(HaveOccurred())
			k, v := c.Selector()
			Expect(k).To(Equal(wantKey))
			Expect(v).To(Equal(wantValue))
		},
		Entry("device", `"device": "eth1"`, "device", "eth1"),
		Entry("hwaddr", `"hwaddr": "02:00:00:00:00:01"`, "hwaddr", "02:00:00:00:00:01"),
		Entry("kernelpath", `"kernelpath": "/sys/devices/pci0000:00/0000:00:03.0"`, "kernelpath", "/sys/devices/pci0000:00/0000:00:03.0"),
		Entry("pciBusID", `"pciBusID": "0000:00:03.0"`, "pciBusID", "0000:00:03.0"),
		Entry("deviceID, PCI", `"runtimeConfig": {"deviceID": "0000:af:00.1"}`, "runtimeConfig.deviceID", "0000:af:00.1"),
		Entry("deviceID, auxiliary", `"runtimeConfig": {"deviceID": "mlx5_core.sf.4"}`, "runtimeConfig.deviceID", "mlx5_core.sf.4"),
		Entry("device over hwaddr", `"device": "eth1", "hwaddr": "02:00:00:00:00:01"`, "device", "eth1"),
		Entry("hwaddr over kernelpath", `"hwaddr": "02:00:00:00:00:01", "kernelpath": "/sys/devices/x"`, "hwaddr", "02:00:00:00:00:01"),
		Entry("kernelpath over pciBusID", `"kernelpath": "/sys/devices/x", "pciBusID": "0000:00:03.0"`, "kernelpath", "/sys/devices/x"),
		Entry("deviceID over pciBusID", `"pciBusID": "0000:00:03.0", "runtimeConfig": {"deviceID": "0000:00:04.0"}`, "runtimeConfig.deviceID", "0000:00:04.0"),
		Entry("device over deviceID", `"device": "eth1", "runtimeConfig": {"deviceID": "0000:00:04.0"}`, "device", "eth1"),
	)

	DescribeTable("refuses bad values with code 7 naming the key",
		func(keys, errHas string) {
			_, err := hostdevice.ParseConfig(wrap(keys))
			Expect(err).To(HaveOccurred())
			Expect(result.Code(err)).To(Equal(uint(types.ErrInvalidNetworkConfig)))
			Expect(err.Error()).To(ContainSubstring(errHas))
		},
		Entry("no selector", ``, `specify one of "device", "hwaddr"`),
		Entry("an unused selector malformed", `"device": "eth1", "pciBusID": "../x"`, `pciBusID: "../x" is not a PCI address`),
		Entry("device name", `"device": "a/b"`, `device: "a/b"`),
		Entry("hwaddr", `"hwaddr": "zz"`, `hwaddr: "zz"`),
		Entry("kernelpath relative", `"kernelpath": "devices/x"`, `kernelpath: "devices/x"`),
		Entry("kernelpath outside /sys/devices", `"kernelpath": "/etc/passwd"`, `kernelpath: "/etc/passwd"`),
		Entry("kernelpath climbing out", `"kernelpath": "/sys/devices/../../etc"`, `kernelpath: "/sys/devices/../../etc"`),
		Entry("pciBusID", `"pciBusID": "../../../etc"`, `pciBusID: "../../../etc" is not a PCI address`),
		Entry("deviceID", `"runtimeConfig": {"deviceID": "../x"}`, `runtimeConfig.deviceID: "../x"`),
		// A PCI address is the whole value: one inside a path would take
		// the sysfs lookup elsewhere.
		Entry("pciBusID with a path after", `"pciBusID": "0000:00:03.0/../../../../etc"`, `pciBusID: "0000:00:03.0/../../../../etc" is not a PCI address`),
		Entry("pciBusID with a path before", `"pciBusID": "../../../0000:00:03.0"`, `pciBusID: "../../../0000:00:03.0" is not a PCI address`),
		Entry("deviceID with a path after", `"runtimeConfig": {"deviceID": "0000:00:03.0/../../x"}`, `runtimeConfig.deviceID: "0000:00:03.0/../../x"`),
		Entry("deviceID with a path before", `"runtimeConfig": {"deviceID": "../0000:00:03.0"}`, `runtimeConfig.deviceID: "../0000:00:03.0"`),
		Entry("ipam.type", `"device": "eth1", "ipam": {"type": "a/b"}`, "ipam"),
	)

	It("refuses malformed JSON with code 6", func() {
		_, err := hostdevice.ParseConfig([]byte(`{"name": `))
		Expect(result.Code(err)).To(Equal(uint(types.ErrDecodingFailure)))
	})
})

// sysfsTree builds a sysfs-shaped tree under a temporary root.
type sysfsTree string

func newSysfs() sysfsTree { return sysfsTree(GinkgoT().TempDir()) }

func (t sysfsTree) root() string { return string(t) }

// netdev adds net/<name> under the device folder dev (relative to root).
func (t sysfsTree) netdev(dev, name string) {
	GinkgoHelper()
	Expect(os.MkdirAll(filepath.Join(string(t), dev, "net", name), 0o755)).To(Succeed())
}

// driver binds the device folder dev to driver drv (a symlink, as sysfs has).
func (t sysfsTree) driver(dev, drv string) {
	GinkgoHelper()
	drvDir := filepath.Join(string(t), "bus/pci/drivers", drv)
	Expect(os.MkdirAll(drvDir, 0o755)).To(Succeed())
	Expect(os.MkdirAll(filepath.Join(string(t), dev), 0o755)).To(Succeed())
	Expect(os.Symlink(drvDir, filepath.Join(string(t), dev, "driver"))).To(Succeed())
}

var _ = Describe("sysfs resolution", func() {
	var fs sysfsTree
	BeforeEach(func() { fs = newSysfs() })

	It("finds the netdev of a PCI device by pciBusID", func() {
		fs.netdev("bus/pci/devices/0000:00:05.0", "ens5")
		fs.driver("bus/pci/devices/0000:00:05.0", "e1000e")
		names, drv, err := hostdevice.ReadSysfs(fs.root(), wrap(`"pciBusID": "0000:00:05.0"`))
		Expect(err).NotTo(HaveOccurred())
		Expect(names).To(Equal([]string{"ens5"}))
		Expect(drv).To(BeEmpty())
	})
	It("finds the netdev of a virtio PCI device one level down", func() {
		fs.netdev("bus/pci/devices/0000:00:07.0/virtio3", "eth0")
		names, _, err := hostdevice.ReadSysfs(fs.root(), wrap(`"pciBusID": "0000:00:07.0"`))
		Expect(err).NotTo(HaveOccurred())
		Expect(names).To(Equal([]string{"eth0"}))
	})
	It("finds the netdev of runtimeConfig.deviceID, PCI and auxiliary", func() {
		fs.netdev("bus/pci/devices/0000:af:00.1", "ens1f1")
		fs.netdev("bus/auxiliary/devices/mlx5_core.sf.4", "enp1s0f0s4")
		names, _, err := hostdevice.ReadSysfs(fs.root(), wrap(`"runtimeConfig": {"deviceID": "0000:af:00.1"}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(names).To(Equal([]string{"ens1f1"}))
		names, _, err = hostdevice.ReadSysfs(fs.root(), wrap(`"runtimeConfig": {"deviceID": "mlx5_core.sf.4"}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(names).To(Equal([]string{"enp1s0f0s4"}))
	})
	It("finds the netdevs under a kernelpath", func() {
		fs.netdev("devices/pci0000:00/0000:00:03.0", "ens3")
		names, _, err := hostdevice.ReadSysfs(fs.root(), wrap(`"kernelpath": "/sys/devices/pci0000:00/0000:00:03.0"`))
		Expect(err).NotTo(HaveOccurred())
		Expect(names).To(Equal([]string{"ens3"}))
	})
	DescribeTable("reports a userspace driver instead of a netdev",
		func(drv string) {
			fs.driver("bus/pci/devices/0000:00:06.0", drv)
			names, got, err := hostdevice.ReadSysfs(fs.root(), wrap(`"pciBusID": "0000:00:06.0"`))
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(drv))
			Expect(names).To(BeEmpty())
		},
		Entry("vfio-pci", "vfio-pci"), Entry("uio_pci_generic", "uio_pci_generic"), Entry("igb_uio", "igb_uio"),
	)
	DescribeTable("is a config error naming the key and the folder",
		func(keys, errHas string) {
			fs.driver("bus/pci/devices/0000:00:08.0", "e1000e") // a device without a netdev
			_, _, err := hostdevice.ReadSysfs(fs.root(), wrap(keys))
			Expect(err).To(HaveOccurred())
			Expect(result.Code(err)).To(Equal(uint(types.ErrInvalidNetworkConfig)))
			Expect(err.Error()).To(ContainSubstring(errHas))
		},
		Entry("a missing PCI device", `"pciBusID": "0000:00:09.0"`, `pciBusID: "0000:00:09.0": no device at `),
		Entry("a PCI device without a netdev", `"pciBusID": "0000:00:08.0"`, `pciBusID: "0000:00:08.0": no network interface under `),
		Entry("a missing auxiliary device", `"runtimeConfig": {"deviceID": "mlx5_core.sf.9"}`, "bus/auxiliary/devices/mlx5_core.sf.9"),
	)
})
