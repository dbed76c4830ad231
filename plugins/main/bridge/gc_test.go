package bridge_test

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("GC without a list of valid attachments", func() {
	var hostNS, contNS *ns.NetNS
	var dataDir string

	BeforeEach(func() { hostNS, contNS, dataDir = testutil.NewAttachNS() })

	// cnitool gc and libcni's GCNetworkList(ctx, list, nil) send no key,
	// after running DEL for every cached attachment: nothing is valid.
	It("releases the addresses and rules of every attachment of the network", func() {
		stdin := netConf("1.1.0", `"ipMasq": true, "macspoofchk": true`, hostLocal(dataDir, "10.31.0.0/24"))
		mustAdd(hostNS, testutil.Call{ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Stdin: stdin})
		Expect(rulesText(hostNS)).To(MatchRegexp(ownerRE("c1")))
		Expect(testutil.Reservations(dataDir)).To(HaveLen(1))

		gc := testutil.Call{Command: "GC", Stdin: []byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": %q, "type": "bridge",
			"bridge": "cnibr0", "ipMasq": true, "macspoofchk": true, "ipam": %s}`, netName, hostLocal(dataDir, "10.31.0.0/24")))}
		out := run(hostNS, gc)
		Expect(out.Err).To(BeNil())
		Expect(rulesText(hostNS)).NotTo(MatchRegexp(ownerRE("c1")))
		Expect(testutil.Reservations(dataDir)).To(BeEmpty())
	})

	It("refuses a malformed entry with code 7 naming its index, and removes nothing", func() {
		stdin := netConf("1.1.0", `"ipMasq": true, "macspoofchk": true`, hostLocal(dataDir, "10.31.0.0/24"))
		mustAdd(hostNS, testutil.Call{ContainerID: "c1", Netns: contNS.Path(), IfName: "eth0", Stdin: stdin})
		before := rulesText(hostNS)

		gc := testutil.Call{Command: "GC", Stdin: []byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": %q, "type": "bridge",
			"bridge": "cnibr0", "ipMasq": true, "macspoofchk": true, "ipam": %s,
			"cni.dev/valid-attachments": [{}]}`, netName, hostLocal(dataDir, "10.31.0.0/24")))}
		out := run(hostNS, gc)
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring(`cni.dev/valid-attachments[0]: "containerID": missing`))
		Expect(rulesText(hostNS)).To(Equal(before))
		Expect(testutil.Reservations(dataDir)).To(HaveLen(1))
	})
})
