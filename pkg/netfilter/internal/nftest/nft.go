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
