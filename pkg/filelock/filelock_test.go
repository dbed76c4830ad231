package filelock

import (
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Holders never overlap: each checks that nobody else is inside.
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	var mu sync.Mutex
	inside, maxInside := 0, 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := Lock(path, 0o600)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			maxInside = max(maxInside, inside)
			mu.Unlock()
			for range 100 {
				runtime.Gosched() // hold the lock while others get to run
			}
			mu.Lock()
			inside--
			mu.Unlock()
			f.Close()
		}()
	}
	wg.Wait()
	if maxInside != 1 {
		t.Errorf("%d holders at once", maxInside)
	}
}

func TestLockReportsPath(t *testing.T) {
	_, err := Lock(filepath.Join(t.TempDir(), "missing-dir", "lock"), 0o600)
	if err == nil {
		t.Fatal("no error for a lock in a missing folder")
	}
}
