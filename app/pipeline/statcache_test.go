package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// Snapshot keeps the project's stat cache in the home, 0600; a garbage
// cache is rewritten, and an edit made after a snapshot is in the next.
func TestSnapshotStatCache(t *testing.T) {
	h := filepath.Join(t.TempDir(), "airlock")
	s, err := sandbox.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	writeTree(t, project, map[string]string{"a.txt": "one\n"})
	cache := home.Layout{Root: h}.StatCache(project)
	if err := os.MkdirAll(filepath.Dir(cache), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cache, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	snap := func() string {
		t.Helper()
		b, err := Snapshot(context.Background(), s, project, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := b.Manifest.Lookup("a.txt")
		return e.SHA256
	}
	first := snap()
	fi, err := os.Stat(cache)
	if err != nil {
		t.Fatalf("no stat cache after a snapshot: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("stat cache is %#o, want 0600", fi.Mode().Perm())
	}
	if data, _ := os.ReadFile(cache); string(data) == "garbage" {
		t.Error("the garbage stat cache was not rewritten")
	}
	writeTree(t, project, map[string]string{"a.txt": "two\n"})
	if snap() == first {
		t.Error("an edit after a snapshot is not in the next one")
	}
}
