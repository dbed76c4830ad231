package hostlocal

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// readResolvConf turns the resolv.conf at path into result DNS, as upstream
// does: nameserver lines, the last domain, search and options words.
func readResolvConf(path string) (types.DNS, error) {
	f, err := os.Open(path)
	if err != nil {
		return types.DNS{}, fmt.Errorf("ipam.resolvConf: %w", err)
	}
	defer f.Close()
	dns, err := parseResolvConf(f)
	if err != nil {
		return types.DNS{}, fmt.Errorf("ipam.resolvConf: read %s: %w", path, err)
	}
	return dns, nil
}

func parseResolvConf(r io.Reader) (types.DNS, error) {
	var dns types.DNS
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			dns.Nameservers = append(dns.Nameservers, f[1])
		case "domain":
			dns.Domain = f[1]
		case "search":
			dns.Search = append(dns.Search, f[1:]...)
		case "options":
			dns.Options = append(dns.Options, f[1:]...)
		}
	}
	return dns, sc.Err()
}
