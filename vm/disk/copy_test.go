package disk

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// sparseImage writes an image of size bytes at path with data only in
// runs (offset → bytes), holes everywhere else, and returns its content.
func sparseImage(t *testing.T, path string, size int64, runs map[int64][]byte) []byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	for off, b := range runs {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		copy(want[off:], b)
	}
	return want
}

func testRuns() map[int64][]byte {
	return map[int64][]byte{
		0:                 bytes.Repeat([]byte("head"), 1024),    // 4 KiB at the start
		4 << 20:           bytes.Repeat([]byte("middle"), 1<<14), // ~96 KiB in the middle
		(16 << 20) - 4096: bytes.Repeat([]byte{0xee}, 4096),      // the last block
	}
}

// TestCopySparse: the copy reads the same as the original, is as long,
// and keeps its holes: it takes no more of the host's disk than the
// original.
func TestCopySparse(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "disk.img"), filepath.Join(dir, "copy.img")
	const size = 16 << 20
	want := sparseImage(t, src, size, testRuns())
	if err := copySparse(src, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the copy reads differently from the original")
	}
	checkSparse(t, src, dst, size)
	if err := copySparse(src, dst); err == nil {
		t.Error("copySparse overwrote an existing file")
	}
	if err := copySparse(filepath.Join(dir, "missing"), filepath.Join(dir, "none")); err == nil {
		t.Error("copySparse of a missing file worked")
	}
	if _, err := os.Lstat(filepath.Join(dir, "none")); err == nil {
		t.Error("a failed copy left its file behind")
	}
}

// checkSparse fails when dst takes more of the host's disk than src, or
// when src is sparse and dst is not.
func checkSparse(t *testing.T, src, dst string, size int64) {
	t.Helper()
	a, b := allocatedBytes(t, src), allocatedBytes(t, dst)
	t.Logf("allocated: original %d, copy %d of %d bytes", a, b, size)
	if a < size/2 && b > a {
		t.Errorf("the copy takes %d bytes of the host's disk, the original %d: holes were filled", b, a)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Size() != size {
		t.Errorf("the copy is %v bytes long (%v), want %d", fi.Size(), err, size)
	}
}

// TestKeepRaw: a raw image is kept as a clone where the file system can
// clone files, else (ext4) as a sparse copy; either reads the same and
// keeps the holes.
func TestKeepRaw(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "disk.img"), filepath.Join(dir, "kept.img")
	const size = 16 << 20
	want := sparseImage(t, src, size, testRuns())
	res, err := Keep(context.Background(), src, dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kept by %s", res.Method)
	if res.Format != Raw {
		t.Errorf("format %q, want raw", res.Format)
	}
	if m, _ := fileClone(); res.Method != m && res.Method != MethodCopy {
		t.Errorf("kept by %s: want %q or a copy", res.Method, m)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the kept disk reads differently (%v)", err)
	}
	checkSparse(t, src, dst, size)
	if _, err := Keep(context.Background(), src, dst); err == nil {
		t.Error("Keep overwrote an existing file")
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, want) {
		t.Error("a refused Keep changed the existing file")
	}
}

// TestKeepQCOW2Copies: a qcow2 image (small: an overlay) is copied, never
// cloned as raw.
func TestKeepQCOW2Copies(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "root.img"), filepath.Join(dir, "kept.img")
	want := append(append([]byte{}, qcow2Magic...), bytes.Repeat([]byte("overlay"), 1000)...)
	if err := os.WriteFile(src, want, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Keep(context.Background(), src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if res != (Result{Method: MethodCopy, Format: QCOW2}) {
		t.Errorf("Keep = %+v, want a qcow2 copy", res)
	}
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the copy reads differently (%v)", err)
	}
}

// TestFileCopier: copies have their source's content and the asked mode;
// on a file system that cannot reflink (ext4) every file is copied, and
// the copier stops asking after the first refusal.
func TestFileCopier(t *testing.T) {
	dir := t.TempDir()
	var c FileCopier
	var wg sync.WaitGroup
	errs := make([]error, 8)
	linked := make([]bool, 8)
	for i := range 8 {
		src := filepath.Join(dir, "src"+string(rune('a'+i)))
		if err := os.WriteFile(src, bytes.Repeat([]byte{byte(i)}, 1000*i), 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			linked[i], errs[i] = c.Copy(src, src+".copy", fs.FileMode(0o700|i))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		src := filepath.Join(dir, "src"+string(rune('a'+i)))
		want, _ := os.ReadFile(src)
		got, err := os.ReadFile(src + ".copy")
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("copy %d reads differently (%v)", i, err)
		}
		if fi, err := os.Stat(src + ".copy"); err != nil || fi.Mode().Perm() != fs.FileMode(0o700|i) {
			t.Errorf("copy %d: mode %v (%v), want %v", i, fi.Mode().Perm(), err, fs.FileMode(0o700|i))
		}
	}
	if runtime.GOOS != "linux" {
		if slices.Contains(linked, true) {
			t.Error("a file was reflinked where reflinks are not wired up")
		}
	} else if !slices.Contains(linked, true) && !c.noReflink.Load() {
		t.Error("no file was reflinked, yet the copier still asks for reflinks")
	}
	src := filepath.Join(dir, "srca")
	if _, err := c.Copy(src, src+".copy", 0o600); err == nil {
		t.Error("Copy overwrote an existing file")
	}
}
