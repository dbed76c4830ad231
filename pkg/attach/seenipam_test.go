package attach_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"

	"github.com/cniforge/plugins/pkg/ns"
)

// seenEnv names the file an IPAM delegate made of this test binary writes,
// on DEL, whether CNI_IFNAME was still in CNI_NETNS ("present" or "gone"),
// read over netlink. Unset, the binary is the test suite.
const seenEnv = "CNIFORGE_TEST_IPAM_SEEN"

func init() {
	seen := os.Getenv(seenEnv)
	if seen == "" || os.Getenv("CNI_COMMAND") == "" {
		return
	}
	if os.Getenv("CNI_COMMAND") == "DEL" {
		if err := os.WriteFile(seen, []byte(linkState(os.Getenv("CNI_NETNS"), os.Getenv("CNI_IFNAME"))+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(0) // an IPAM that answers nothing, as the frame's DEL expects
}

// linkState is "present" or "gone", or what kept it from telling (which
// fails the spec reading it).
func linkState(nsPath, name string) string {
	n, err := ns.Open(nsPath)
	if err != nil {
		return "error: " + err.Error()
	}
	defer n.Close()
	h, err := n.Handle()
	if err != nil {
		return "error: " + err.Error()
	}
	defer h.Close()
	_, err = h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	switch {
	case err == nil:
		return "present"
	case errors.As(err, &notFound):
		return "gone"
	}
	return "error: " + err.Error()
}
