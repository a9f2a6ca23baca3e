package manifest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// cacheClock makes every file look old enough to remember: "now" is an
// hour ahead.
func cacheClock(c *HashCache) {
	c.now = func() time.Time { return time.Now().Add(time.Hour) }
}

func skipWithoutStatData(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("HashCache needs Linux or macOS stat data")
	}
}

func walkCached(t *testing.T, dir string, c *HashCache) (*Manifest, int) {
	t.Helper()
	var last Progress
	m, _, err := Walk(context.Background(), dir, WalkOptions{Cache: c, Progress: func(p Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	if last.FilesHashed != last.FilesTotal {
		t.Errorf("progress ends at %d/%d files", last.FilesHashed, last.FilesTotal)
	}
	return m, c.Len()
}

func TestHashCacheMatchesFullWalk(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "src/b.go": "package b\n", "src/c/d.txt": "d\n", "empty": ""})
	os.Symlink("a.txt", filepath.Join(dir, "link"))
	c := &HashCache{}
	cacheClock(c)
	ctx := context.Background()

	full := func() *Manifest {
		m, _, err := Walk(ctx, dir, WalkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m1, n := walkCached(t, dir, c)
	if d := cmp.Diff(full(), m1); d != "" {
		t.Fatalf("first cached walk differs from a plain walk (-want +got):\n%s", d)
	}
	if n != 4 {
		t.Errorf("cache remembers %d files, want 4", n)
	}

	// Content and size change; same size with the old mtime put back (the
	// change time still moves); a new file; a deleted file.
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("longer a\n"), 0o644)
	fi, _ := os.Stat(filepath.Join(dir, "src/b.go"))
	os.WriteFile(filepath.Join(dir, "src/b.go"), []byte("package x\n"), 0o644)
	os.Chtimes(filepath.Join(dir, "src/b.go"), fi.ModTime(), fi.ModTime())
	os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new\n"), 0o644)
	os.Remove(filepath.Join(dir, "src/c/d.txt"))
	m2, n := walkCached(t, dir, c)
	if d := cmp.Diff(full(), m2); d != "" {
		t.Fatalf("cached walk after edits differs from a plain walk (-want +got):\n%s", d)
	}
	if n != 4 {
		t.Errorf("cache remembers %d files after the edits, want 4 (d.txt forgotten, new.txt added)", n)
	}
	if _, ok := c.files["src/c/d.txt"]; ok {
		t.Error("the deleted file is still remembered")
	}
}

// TestHashCacheTrustsStat shows the cache is used: a remembered hash is
// taken as is while the stat data is unchanged.
func TestHashCacheTrustsStat(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	c := &HashCache{}
	cacheClock(c)
	walkCached(t, dir, c)
	f := c.files["a.txt"]
	f.sum = sum("not what the file holds")
	c.files["a.txt"] = f
	m, _ := walkCached(t, dir, c)
	if e, _ := m.Lookup("a.txt"); e.SHA256 != sum("not what the file holds") {
		t.Errorf("a.txt hashed again although its stat data did not change: %s", e.SHA256)
	}
	if e, _ := m.Lookup("b.txt"); e.SHA256 != sum("b\n") {
		t.Errorf("b.txt: %s", e.SHA256)
	}
}

// TestHashCacheRacy: files changed within racyWindow of the walk are not
// remembered, so an edit in the same timestamp tick cannot hide.
func TestHashCacheRacy(t *testing.T) {
	skipWithoutStatData(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	c := &HashCache{} // the real clock: a.txt was just written
	if _, n := walkCached(t, dir, c); n != 0 {
		t.Errorf("a file written just now is remembered (%d files)", n)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, "a.txt"), old, old)
	if _, n := walkCached(t, dir, c); n != 0 {
		t.Errorf("a file changed just now (ctime) is remembered (%d files)", n)
	}
}

func TestHashCacheZeroValueAndNil(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	var c HashCache
	if c.Len() != 0 {
		t.Fatal("zero cache not empty")
	}
	m, _, err := Walk(context.Background(), dir, WalkOptions{Cache: &c})
	if err != nil || len(m.Entries) != 1 || m.Entries[0].SHA256 != sum("a\n") {
		t.Fatalf("%+v, %v", m, err)
	}
}
