package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
)

// RecordEnv names the folder where RecordCall saves every stdin config and
// CNI_ARGS the test helpers (Run, Exec) hand to a plugin. Unset, nothing is
// recorded. scripts/fuzzseeds turns the records into the fuzz targets'
// seed corpora (testdata/fuzz/Fuzz*/).
const RecordEnv = "CNIFORGE_FUZZ_RECORD"

// Recorded is one saved invocation.
type Recorded struct {
	Command string `json:"command"`
	Stdin   string `json:"stdin"`
	Args    string `json:"args"` // CNI_ARGS
}

// RecordCall saves c's stdin and CNI_ARGS under $CNIFORGE_FUZZ_RECORD, one
// file per distinct call (named by its hash, so reruns and parallel
// processes dedupe for free). Best effort: a failure to record never fails
// the test that made the call.
func RecordCall(c Call) {
	dir := os.Getenv(RecordEnv)
	if dir == "" || len(c.Stdin) == 0 {
		return
	}
	b, err := json.Marshal(Recorded{Command: c.Command, Stdin: string(c.Stdin), Args: c.Args})
	if err != nil {
		return
	}
	sum := sha256.Sum256(b)
	_ = os.MkdirAll(dir, 0o755)                                                          // best effort: see above
	_ = os.WriteFile(filepath.Join(dir, hex.EncodeToString(sum[:12])+".json"), b, 0o644) // best effort: see above
}
