package objects

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
)

func sumOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestPutOpen(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"", "hello", strings.Repeat("x", 1<<20+3)} {
		sum, size, err := s.Put(strings.NewReader(content))
		if err != nil {
			t.Fatal(err)
		}
		if sum != sumOf(content) || size != int64(len(content)) {
			t.Errorf("Put = %s, %d; want %s, %d", sum, size, sumOf(content), len(content))
		}
		if !s.Has(sum) {
			t.Errorf("Has(%s) = false after Put", sum)
		}
		again, _, err := s.Put(strings.NewReader(content))
		if err != nil || again != sum {
			t.Errorf("second Put = %s, %v", again, err)
		}
		rc, err := s.Open(sum)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != content {
			t.Errorf("Open(%s) returned other content", sum)
		}
		p, _ := s.Path(sum)
		info, err := os.Stat(p)
		if err != nil || info.Mode().Perm() != objectMode {
			t.Errorf("object %s: %v, mode %v; want read-only", p, err, info.Mode())
		}
		if err := s.Verify(sum); err != nil {
			t.Error(err)
		}
	}
	if tmp, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
	missing := sumOf("missing")
	if s.Has(missing) {
		t.Error("Has(missing) = true")
	}
	if _, err := s.Open(missing); !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want ErrNotFound", err)
	}
}

func TestHostileSums(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, sum := range []string{
		"", "ab", "../../../../etc/passwd", strings.Repeat("a", 63), strings.Repeat("a", 65),
		strings.ToUpper(sumOf("x")), "../" + sumOf("x")[3:], sumOf("x")[:62] + "/.", sumOf("x")[:63] + "\x00",
		sumOf("x")[:63] + "g",
	} {
		if _, err := s.Path(sum); !errors.Is(err, ErrInvalidSum) {
			t.Errorf("Path(%q) = %v, want ErrInvalidSum", sum, err)
		}
		if s.Has(sum) {
			t.Errorf("Has(%q) = true", sum)
		}
		if _, err := s.Open(sum); !errors.Is(err, ErrInvalidSum) {
			t.Errorf("Open(%q) = %v, want ErrInvalidSum", sum, err)
		}
		if err := s.PutExpect(strings.NewReader("x"), sum, -1); !errors.Is(err, ErrInvalidSum) {
			t.Errorf("PutExpect(%q) = %v, want ErrInvalidSum", sum, err)
		}
	}
}

func TestPutExpect(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, content, sum string
		size               int64
		want               error
	}{
		{"ok", "abc", sumOf("abc"), 3, nil},
		{"any size", "abc", sumOf("abc"), -1, nil},
		{"wrong sum", "abc", sumOf("abd"), 3, ErrMismatch},
		{"longer than said", "abcd", sumOf("abc"), 3, ErrMismatch},
		{"shorter than said", "ab", sumOf("ab"), 3, ErrMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.PutExpect(strings.NewReader(tt.content), tt.sum, tt.size)
			if !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
				t.Fatalf("PutExpect = %v, want %v", err, tt.want)
			}
			if tt.want != nil && s.Has(tt.sum) && tt.sum != sumOf("abc") {
				t.Errorf("mismatched content was stored under %s", tt.sum)
			}
		})
	}
}

func TestPutFile(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, size, err := s.PutFile(p)
	if err != nil || sum != sumOf("data") || size != 4 {
		t.Errorf("PutFile = %s, %d, %v", sum, size, err)
	}
	if _, _, err := s.PutFile(filepath.Dir(p)); err == nil {
		t.Error("PutFile(dir) succeeded")
	}
}

func TestSnapshotTree(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{"a.txt": "alpha", "d/b.txt": "beta", "d/e/c": strings.Repeat("c", 100000)}
	for p, c := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(c), 0o644)
	}
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	m, _, err := manifest.Walk(context.Background(), root, manifest.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := SnapshotTree(context.Background(), root, m, s); err != nil {
		t.Fatal(err)
	}
	// Edits to the project after the snapshot do not touch the baseline.
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("edited"), 0o644)
	for _, e := range m.Entries {
		if e.Type != manifest.File {
			continue
		}
		rc, err := s.Open(e.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != files[e.Path] {
			t.Errorf("baseline of %s changed", e.Path)
		}
	}

	// A file changed between walk and snapshot is named in the error.
	m2, _, err := manifest.Walk(context.Background(), root, manifest.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("edited again"), 0o644)
	err = SnapshotTree(context.Background(), root, m2, s)
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "a.txt") {
		t.Errorf("SnapshotTree after an edit = %v, want ErrChanged naming a.txt", err)
	}
	if s.Has(sumOf("edited again")) {
		t.Error("the changed content was stored")
	}

	// A file swapped for a symlink out of the tree is never read.
	m3, _, _ := manifest.Walk(context.Background(), root, manifest.WalkOptions{})
	os.Remove(filepath.Join(root, "a.txt"))
	os.Symlink("/etc/hostname", filepath.Join(root, "a.txt"))
	s3, _ := Open(t.TempDir())
	if err := SnapshotTree(context.Background(), root, m3, s3); err == nil {
		t.Error("SnapshotTree read through a symlink swapped in")
	}
}

// TestSnapshotTreeBatch stores many files at once, duplicates among them,
// and a batch that fails part way leaves nothing behind: no temporary
// file, and none of its objects in place.
func TestSnapshotTreeBatch(t *testing.T) {
	root := t.TempDir()
	for i := range 200 {
		content := fmt.Sprintf("file %d", i%150) // 50 duplicates
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%03d", i)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, _, err := manifest.Walk(context.Background(), root, manifest.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := SnapshotTree(context.Background(), root, m, s); err != nil {
		t.Fatal(err)
	}
	for i := range 150 {
		if err := s.Verify(sumOf(fmt.Sprintf("file %d", i))); err != nil {
			t.Errorf("object %d: %v", i, err)
		}
	}
	if tmps, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmps) != 0 {
		t.Errorf("temporary files left: %d", len(tmps))
	}

	// One file changed after the walk: the batch fails and stores none.
	root2 := t.TempDir()
	for i := range 100 {
		os.WriteFile(filepath.Join(root2, fmt.Sprintf("g%03d", i)), []byte(fmt.Sprintf("new %d", i)), 0o644)
	}
	m2, _, err := manifest.Walk(context.Background(), root2, manifest.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root2, "g050"), []byte("changed"), 0o644)
	if err := SnapshotTree(context.Background(), root2, m2, s); !errors.Is(err, ErrChanged) {
		t.Fatalf("SnapshotTree = %v, want ErrChanged", err)
	}
	for i := range 100 {
		if s.Has(sumOf(fmt.Sprintf("new %d", i))) {
			t.Errorf("object of g%03d stored by a failed batch", i)
		}
	}
	if tmps, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmps) != 0 {
		t.Errorf("temporary files left after a failed batch: %d", len(tmps))
	}

	// A cancelled context stores nothing either.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	os.WriteFile(filepath.Join(root2, "g050"), []byte("new 50"), 0o644)
	if err := SnapshotTree(ctx, root2, m2, s); !errors.Is(err, context.Canceled) {
		t.Errorf("SnapshotTree with a cancelled context = %v", err)
	}
	if tmps, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmps) != 0 {
		t.Errorf("temporary files left after a cancelled batch: %d", len(tmps))
	}
}

func FuzzPath(f *testing.F) {
	for _, s := range []string{sumOf("x"), "../etc", strings.Repeat("0", 64), strings.Repeat("/", 64)} {
		f.Add(s)
	}
	dir := f.TempDir()
	s, err := Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sum string) {
		p, err := s.Path(sum)
		if err != nil {
			return
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || strings.HasPrefix(rel, "..") || filepath.Dir(filepath.Dir(rel)) != "." {
			t.Fatalf("Path(%q) = %s, outside objects/xx/", sum, p)
		}
	})
}

func BenchmarkPut(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	b.SetBytes(int64(len(data)))
	for i := 0; b.Loop(); i++ {
		data[0] = byte(i)
		data[1] = byte(i >> 8)
		if _, _, err := s.Put(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
