package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
			t.Errorf("mode %v, want 0640", fi.Mode().Perm())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory, want only the target (no temporary file left)", len(ents))
	}
}

// A write that cannot complete leaves the old content and no temporary
// file.
func TestWriteFileFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "target")
	if err := WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The rename fails: a directory stands where the target is expected.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	os.Mkdir(filepath.Join(sub, "x"), 0o755)
	os.WriteFile(filepath.Join(sub, "x", "keep"), []byte("k"), 0o600)
	if err := WriteFile(filepath.Join(sub, "x"), []byte("new"), 0o600); err == nil {
		t.Fatal("renaming over a non-empty directory succeeded")
	}
	if ents, _ := os.ReadDir(sub); len(ents) != 1 {
		t.Errorf("%d entries in %s after a failed write, want 1 (the temporary file removed)", len(ents), sub)
	}
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Errorf("target now %q", got)
	}
}
