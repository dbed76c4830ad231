package tuning

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cniforge/plugins/pkg/ip"
	"github.com/cniforge/plugins/pkg/ns"
	"github.com/cniforge/plugins/pkg/result"
)

// readSysctls reads the current value of each sysctl in the container. A
// key the kernel does not have is a config error (code 7) naming it.
func readSysctls(contNS *ns.NetNS, sysctls []sysctl) (map[string]string, error) {
	old := map[string]string{}
	if len(sysctls) == 0 {
		return old, nil
	}
	err := contNS.Do(func() error {
		for _, s := range sysctls {
			v, err := ip.GetSysctl(s.Path)
			if errors.Is(err, fs.ErrNotExist) {
				return result.InvalidConfig(fmt.Errorf("sysctl: %q: no /proc/sys/%s in %s", s.Key, s.Path, contNS.Path()))
			}
			if err != nil {
				return fmt.Errorf("in %s: %w", contNS.Path(), err)
			}
			old[s.Path] = v
		}
		return nil
	})
	return old, err
}

// writeSysctl writes value to /proc/sys/<p> in the container namespace:
// /proc/sys/net is the namespace of the thread that opens it.
func writeSysctl(contNS *ns.NetNS, p, value string) error {
	return writeSysctlWith(contNS, ip.SetSysctl, p, value)
}

// writeSysctlWith is writeSysctl writing with set.
func writeSysctlWith(contNS *ns.NetNS, set func(p, value string) error, p, value string) error {
	return contNS.Do(func() error {
		if err := set(p, value); err != nil {
			if errors.Is(err, unix.EINVAL) {
				// The kernel is the only judge of a sysctl's values.
				return result.InvalidConfig(fmt.Errorf("sysctl: the kernel refuses %q for %s in %s: %w", value, p, contNS.Path(), err))
			}
			return fmt.Errorf("in %s: %w", contNS.Path(), err)
		}
		return nil
	})
}

// checkAllowlist refuses (code 7) a sysctl key that matches no line of
// the allowlist file, when that file exists. Each non-empty line is a
// regular expression matched, as upstream matches it, anywhere in the key
// as configured (IFNAME unreplaced).
func checkAllowlist(file string, sysctls []sysctl) error {
	if len(sysctls) == 0 {
		return nil
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sysctl allowlist: %w", err)
	}
	var allow []*regexp.Regexp
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		re, err := regexp.Compile(line)
		if err != nil {
			return result.InvalidConfig(fmt.Errorf("sysctl allowlist %s line %d: %w", file, n, err))
		}
		allow = append(allow, re)
	}
	for _, s := range sysctls {
		ok := false
		for _, re := range allow {
			if re.MatchString(s.Key) {
				ok = true
				break
			}
		}
		if !ok {
			return result.InvalidConfig(fmt.Errorf("sysctl: %q matches no line of the allowlist %s", s.Key, file))
		}
	}
	return nil
}
