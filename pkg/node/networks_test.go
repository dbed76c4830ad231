package node

import (
	"fmt"
	"testing"

	hostlocal "github.com/cniforge/plugins/plugins/ipam/host-local"
)

// ls's FREE: how many more attachments fit. An ADD takes an address from
// every range set, so a dual-stack network is as full as its fuller set.
func TestFreeAddressesPerRangeSet(t *testing.T) {
	for _, c := range []struct {
		name, ranges string
		res          []string
		free         string
		perSet       []string
	}{
		{"one /24 without its gateway", `[[{"subnet":"10.1.0.0/24"}]]`, []string{"10.1.0.2", "10.1.0.3"}, "251", nil},
		{"dual stack: the fuller set", `[[{"subnet":"10.1.0.0/24"}],[{"subnet":"fd00::/120"}]]`,
			[]string{"10.1.0.2", "10.1.0.3", "fd00::2"}, "251", []string{"251", "253"}},
		{"a reservation outside every range", `[[{"subnet":"10.1.0.0/24"}]]`, []string{"10.9.9.9"}, "253", nil},
		{"two ranges in one set", `[[{"subnet":"10.1.0.0/29"},{"subnet":"10.2.0.0/29"}]]`, []string{"10.2.0.3"}, "9", nil},
		{"IPv6 /64", `[[{"subnet":"fd00::/64"}]]`, nil, "18446744073709551614", nil},
	} {
		conf, err := hostlocal.ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"n","ipam":{"type":"host-local","ranges":` + c.ranges + `}}`))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var res []reservation
		for _, ip := range c.res {
			res = append(res, reservation{IP: ip})
		}
		free, perSet := freeAddresses(conf, res)
		if free != c.free || fmt.Sprint(perSet) != fmt.Sprint(c.perSet) {
			t.Errorf("%s: free %s %v, want %s %v", c.name, free, perSet, c.free, c.perSet)
		}
	}
}
