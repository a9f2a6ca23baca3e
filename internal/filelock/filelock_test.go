package filelock

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Holders of the lock take turns: a counter incremented in two steps
// under it is never seen half-way.
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	var (
		wg      sync.WaitGroup
		inside  atomic.Int32 // atomic: the race detector does not see flock
		overlap atomic.Bool
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				unlock, err := Lock(path)
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlap.Store(true)
				}
				inside.Add(-1)
				unlock()
			}
		}()
	}
	wg.Wait()
	if overlap.Load() {
		t.Error("two holders were inside the lock at once")
	}
}

func TestLockMissingDir(t *testing.T) {
	if _, err := Lock(filepath.Join(t.TempDir(), "no", "lock")); err == nil {
		t.Error("locking a file in a missing directory succeeded")
	}
}
