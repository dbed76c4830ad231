package nftest

import (
	"fmt"
	"os/exec"
	"strings"
)

// nftRun runs nft with script on stdin in the calling thread's namespace.
func NftRun(script string, args ...string) (string, error) {
	cmd := exec.Command("nft", args...)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// DeleteRuleWith deletes, with nft in the calling thread's namespace, the
// first rule of chain in table (of family) whose listing contains needle.
func DeleteRuleWith(family, table, chain, needle string) error {
	out, err := NftRun("", "-a", "list", "chain", family, table, chain)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, needle) {
			continue
		}
		_, h, ok := strings.Cut(l, "# handle ")
		if !ok {
			continue
		}
		_, err := NftRun("", "delete", "rule", family, table, chain, "handle", strings.TrimSpace(h))
		return err
	}
	return fmt.Errorf("no rule with %q in chain %s: %s", needle, chain, out)
}
