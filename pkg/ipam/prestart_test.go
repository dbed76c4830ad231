package ipam

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/cniforge/plugins/pkg/result"
)

// fakeHostLocal puts a "host-local" on a fresh CNI_PATH that logs its
// start, then (only once it has read its config) the config it got, and
// answers with body. It returns the log's path.
func fakeHostLocal(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	script := "#!/bin/sh\necho \"start $CNI_COMMAND\" >>" + log + "\nconf=$(cat)\necho \"ran $CNI_COMMAND $conf\" >>" + log + "\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(dir, "host-local"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CNI_PATH", dir)
	return log
}

func readLog(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// The shell creates the file before it writes the line: empty is
	// nothing logged yet.
	if strings.TrimSpace(string(b)) == "" {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// waitStarted waits until the prestarted fake has logged its start, so the
// test sees what it did before it was handed a config.
func waitStarted(t *testing.T, log string) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if len(readLog(t, log)) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the prestarted delegate never started")
}

const conf = `{"cniVersion":"1.0.0","name":"n","type":"x","ipam":{"type":"host-local"}}`

func TestPrestartedActsOnlyWhenHandedItsConfig(t *testing.T) {
	log := fakeHostLocal(t, `echo '{"cniVersion":"1.0.0","ips":[{"address":"10.1.2.3/24"}]}'`)
	p := Prestart("host-local", "ADD")
	if p == nil {
		t.Fatal("Prestart returned nil")
	}
	defer p.Cancel()
	waitStarted(t, log)
	if got := readLog(t, log); len(got) != 1 || got[0] != "start ADD" {
		t.Fatalf("before its config the delegate did %q", got)
	}
	res, err := Add(WithPrestarted(context.Background(), p), "host-local", []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.1.2.3/24" {
		t.Errorf("result %+v", res)
	}
	// One start: the delegation used the prestarted process, no second exec.
	if got := readLog(t, log); len(got) != 2 || got[1] != "ran ADD "+conf {
		t.Errorf("log %q", got)
	}
}

func TestPrestartedCancelledDoesNothing(t *testing.T) {
	log := fakeHostLocal(t, `echo '{}'`)
	p := Prestart("host-local", "DEL")
	waitStarted(t, log)
	p.Cancel()
	if !p.proc.Exited() {
		t.Error("Cancel did not reap the delegate")
	}
	if got := readLog(t, log); len(got) != 1 || got[0] != "start DEL" {
		t.Errorf("a cancelled delegate did %q", got)
	}
	p.Cancel() // twice is harmless
	var nilP *Prestarted
	nilP.Cancel()
}

func TestPrestartedForAnotherVerbIsNotUsed(t *testing.T) {
	log := fakeHostLocal(t, `exit 0`)
	p := Prestart("host-local", "ADD")
	defer p.Cancel()
	if err := Del(WithPrestarted(context.Background(), p), "host-local", []byte(conf)); err != nil {
		t.Fatal(err)
	}
	p.Cancel()
	got := strings.Join(readLog(t, log), "\n")
	if !strings.Contains(got, "ran DEL") || strings.Contains(got, "ran ADD") {
		t.Errorf("log %q", got)
	}
}

func TestPrestartedErrorKeepsItsCode(t *testing.T) {
	fakeHostLocal(t, `echo '{"cniVersion":"1.0.0","code":11,"msg":"pool busy"}'; exit 1`)
	p := Prestart("host-local", "DEL")
	defer p.Cancel()
	err := Del(WithPrestarted(context.Background(), p), "host-local", []byte(conf))
	if result.Code(err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), "pool busy") {
		t.Errorf("got %v", err)
	}
}

func TestPrestartOnlyOurOwnTypes(t *testing.T) {
	fakeHostLocal(t, `exit 0`)
	for _, typ := range []string{"fake-ipam", "whereabouts", "../host-local", ""} {
		if p := Prestart(typ, "ADD"); p != nil {
			p.Cancel()
			t.Errorf("%q prestarted", typ)
		}
	}
	t.Setenv("CNI_PATH", t.TempDir()) // host-local not on it
	if p := Prestart("host-local", "ADD"); p != nil {
		p.Cancel()
		t.Error("prestarted a binary not on CNI_PATH")
	}
}

func TestPrestartedThatNeverReadsIsJudgedByItsExit(t *testing.T) {
	dir := t.TempDir()
	// Exits at once without reading its config: the write meets a closed
	// pipe, which, as for an exec of its own, is no error.
	if err := os.WriteFile(filepath.Join(dir, "host-local"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CNI_PATH", dir)
	p := Prestart("host-local", "DEL")
	defer p.Cancel()
	// Wait until it has exited (a zombie, not yet reaped), so the config
	// is certainly written to a pipe nobody reads.
	stat := fmt.Sprintf("/proc/%d/stat", p.proc.Process().Pid)
	for i := 0; ; i++ {
		b, err := os.ReadFile(stat)
		if err == nil && strings.Contains(string(b), ") Z ") {
			break
		}
		if i == 1000 {
			t.Fatal("the delegate did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := Del(WithPrestarted(context.Background(), p), "host-local", []byte(conf)); err != nil {
		t.Errorf("got %v", err)
	}
}
