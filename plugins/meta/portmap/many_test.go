package portmap_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/attach"
)

// Issue 22, defect 2: upstream adds 5,000 mappings; one nftables batch of
// them exceeded what one netlink message may carry ("sendmsg: message too
// long" above about 2,800).
var _ = Describe("5,000 mappings on nftables", func() {
	It("ADD, CHECK and DEL them, IPv4 and IPv6, and the last one forwards", func() {
		e := newEnv()
		ms := make([]mapping, 5000)
		for i := range ms {
			ms[i] = mapping{HostPort: 20000 + i, ContainerPort: 8080}
		}
		stdin := confOpts{ver: "1.1.0", backend: "nftables", mappings: ms, prev: e.prevResult("1.1.0")}.json()
		tcpServe(e.cont, ":8080", "many")
		out := run(e, attach.Hooks{}, call("ADD", "c1", e, stdin))
		Expect(out.Err).To(BeNil())
		Expect(tcpGet(e.outside, hp(24999))).To(Equal("many"))
		Expect(tcpGet(e.outside, hp6(20000))).To(Equal("many"))
		Expect(run(e, attach.Hooks{}, call("CHECK", "c1", e, stdin)).Err).To(BeNil())
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
		Expect(forwards(e.host)).To(BeEmpty())
		Expect(run(e, attach.Hooks{}, call("DEL", "c1", e, stdin)).Err).To(BeNil())
	})
})
