package dhcp

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("loadRecords", func() {
	It("skips, naming the file, a record without a client ID, and loads the others", func() {
		// The client ID is the lease's key (the file name, the daemon's
		// map, what DEL and GC look up): a record without one could never
		// be released, and all of them would share the one empty key.
		dir := GinkgoT().TempDir()
		good := &record{ClientID: "ctr1/net1/eth0", ContainerID: "ctr1", Network: "net1", IfName: "eth0",
			Netns: "/run/netns/x", Stdin: conf("")}
		Expect(saveRecord(dir, good)).To(Succeed())
		bad := filepath.Join(dir, "0000000000000000.json")
		Expect(os.WriteFile(bad, []byte(`{"containerID": "ctr2", "network": "net1", "ifName": "eth0", "netns": "/run/netns/y"}`), 0o600)).To(Succeed())
		empty := filepath.Join(dir, "1111111111111111.json")
		Expect(os.WriteFile(empty, []byte(`{"clientID": "", "containerID": "ctr3", "network": "net1", "ifName": "eth0"}`), 0o600)).To(Succeed())

		recs, err := loadRecords(dir)
		Expect(recs).To(HaveLen(1))
		Expect(recs[0].ClientID).To(Equal(good.ClientID))
		Expect(err).To(MatchError(ContainSubstring(bad + ": not a lease record")))
		Expect(err).To(MatchError(ContainSubstring(empty + ": not a lease record")))
	})
})
