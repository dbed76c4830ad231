package bridge_test

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/testutil"
	"github.com/cniforge/plugins/plugins/main/bridge"
)

var _ = Describe("GC without a list of valid attachments", func() {
	env := testutil.UseAttachEnv(bridge.Plugin, "eth0")

	// cnitool gc and libcni's GCNetworkList(ctx, list, nil) send no key,
	// after running DEL for every cached attachment: nothing is valid.
	It("releases the addresses and rules of every attachment of the network", func() {
		stdin := netConf("1.1.0", `"ipMasq": true, "macspoofchk": true`, hostLocal(env.DataDir, "10.31.0.0/24"))
		mustAdd(env.HostNS, testutil.Call{ContainerID: "c1", Netns: env.ContNS.Path(), IfName: "eth0", Stdin: stdin})
		Expect(rulesText(env.HostNS)).To(MatchRegexp(ownerRE("c1")))
		Expect(testutil.Reservations(env.DataDir)).To(HaveLen(1))

		gc := testutil.Call{Command: "GC", Stdin: []byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": %q, "type": "bridge",
			"bridge": "cnibr0", "ipMasq": true, "macspoofchk": true, "ipam": %s}`, netName, hostLocal(env.DataDir, "10.31.0.0/24")))}
		out := run(env.HostNS, gc)
		Expect(out.Err).To(BeNil())
		Expect(rulesText(env.HostNS)).NotTo(MatchRegexp(ownerRE("c1")))
		Expect(testutil.Reservations(env.DataDir)).To(BeEmpty())
	})

	It("refuses a malformed entry with code 7 naming its index, and removes nothing", func() {
		stdin := netConf("1.1.0", `"ipMasq": true, "macspoofchk": true`, hostLocal(env.DataDir, "10.31.0.0/24"))
		mustAdd(env.HostNS, testutil.Call{ContainerID: "c1", Netns: env.ContNS.Path(), IfName: "eth0", Stdin: stdin})
		before := rulesText(env.HostNS)

		gc := testutil.Call{Command: "GC", Stdin: []byte(fmt.Sprintf(`{"cniVersion": "1.1.0", "name": %q, "type": "bridge",
			"bridge": "cnibr0", "ipMasq": true, "macspoofchk": true, "ipam": %s,
			"cni.dev/valid-attachments": [{}]}`, netName, hostLocal(env.DataDir, "10.31.0.0/24")))}
		out := run(env.HostNS, gc)
		testutil.ExpectCode(out, types.ErrInvalidNetworkConfig)
		Expect(out.Err.Msg).To(ContainSubstring(`cni.dev/valid-attachments[0]: "containerID": missing`))
		Expect(rulesText(env.HostNS)).To(Equal(before))
		Expect(testutil.Reservations(env.DataDir)).To(HaveLen(1))
	})
})
