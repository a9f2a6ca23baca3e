package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPinnedBaseDiskIsNotPruned: past BaseDiskKeepCount disks, the prune
// removes the least recently used ones, except one a run has pinned
// (another process's, here another open file: flock locks belong to the
// open file, not the process); once unpinned it goes too.
func TestPinnedBaseDiskIsNotPruned(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	id := func(i int) string { return fmt.Sprintf("%064x", i) }
	for i := range BaseDiskKeepCount + 3 {
		for _, ext := range []string{".img", ".json"} {
			p := filepath.Join(dir, id(i)+ext)
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			used := now.Add(-time.Duration(i) * time.Minute) // 0 newest
			if err := os.Chtimes(p, used, used); err != nil {
				t.Fatal(err)
			}
		}
	}
	oldest := filepath.Join(dir, id(BaseDiskKeepCount+2)+".img")
	release, err := PinBaseDisk(oldest)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	pruneBaseDisks(dir, "", now, slog.New(slog.DiscardHandler))
	if !exists(oldest) {
		t.Fatal("the pinned disk was pruned")
	}
	if exists(filepath.Join(dir, id(BaseDiskKeepCount+1)+".img")) || exists(filepath.Join(dir, id(BaseDiskKeepCount+1)+".json")) {
		t.Error("an unpinned disk past the count was kept")
	}
	if !exists(filepath.Join(dir, id(0)+".img")) {
		t.Error("the newest disk was pruned")
	}
	release()
	pruneBaseDisks(dir, "", now, slog.New(slog.DiscardHandler))
	if exists(oldest) {
		t.Error("the disk was kept after its pin was released")
	}
	// A disk gone before it is pinned, or replaced meanwhile, fails to pin
	// with fs.ErrNotExist: the run makes it again.
	if _, err := PinBaseDisk(oldest); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pin of a removed disk: %v, want fs.ErrNotExist", err)
	}
}
