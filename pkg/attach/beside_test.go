package attach

import (
	"errors"

	"github.com/containernetworking/cni/pkg/skel"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/testutil"
)

var _ = Describe("Beside", func() {
	// besides runs fn through Beside with the frame inside host, as a
	// plugin runs inside a test's stand-in host namespace.
	besides := func(host *ns.NetNS, fn func() error) (errs []error) {
		GinkgoHelper()
		Expect(host.Do(func() error {
			a := newAttachment(&skel.CmdArgs{}, &NetConf{}, Hooks{}, nil, nil)
			defer a.Close()
			errs = <-a.Beside(fn)
			return nil
		})).To(Succeed())
		return errs
	}

	It("runs in the plugin's host namespace, not the process's", func() {
		host := testutil.NewNS()
		errs := besides(host, func() error {
			here, err := ns.Current()
			if err != nil {
				return err
			}
			defer here.Close()
			if same, err := here.Same(host); err != nil || !same {
				return errors.Join(err, errors.New("not in the host namespace"))
			}
			return nil
		})
		Expect(errs).To(BeEmpty())
	})

	It("delivers an error, and a panic as an error", func() {
		host := testutil.NewNS()
		Expect(besides(host, func() error { return errors.New("step failed") })).To(ConsistOf(MatchError("step failed")))
		Expect(besides(host, func() error { panic("boom") })).To(ConsistOf(MatchError(ContainSubstring("panic: boom"))))
	})
})
