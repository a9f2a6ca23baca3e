package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// checkBlankDisk: p is a sparse ext4 image of size bytes.
func checkBlankDisk(t *testing.T, p string, size int64) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Errorf("disk is %d bytes, want %d", fi.Size(), size)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("disk mode %v, want 0600", fi.Mode().Perm())
	}
	// Sparse: only metadata is allocated.
	if used := fi.Sys().(*syscall.Stat_t).Blocks * 512; used > 64<<20 {
		t.Errorf("a fresh %d-byte disk uses %d bytes on the host; want it sparse", size, used)
	}
	b := make([]byte, 2)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(b, 1024+0x38); err != nil || b[0] != 0x53 || b[1] != 0xef {
		t.Errorf("no ext4 superblock magic: % x, %v", b, err)
	}
}

func TestCreateDisk(t *testing.T) {
	p := filepath.Join(t.TempDir(), DiskFile)
	const size = 1 << 30
	if err := CreateDisk(context.Background(), p, size, ""); err != nil {
		t.Fatal(err)
	}
	checkBlankDisk(t, p, size)
	if err := CreateDisk(context.Background(), p, size, ""); err == nil {
		t.Error("CreateDisk overwrote an existing file")
	}
}

// TestCreateDiskFromTemplate: with a template directory, the blank file
// system is formatted once per size and each disk is a copy of it; what
// is written to a disk never reaches the template; a template of another
// size (a damaged one) is made again.
func TestCreateDiskFromTemplate(t *testing.T) {
	ctx := context.Background()
	dir, tmpls := t.TempDir(), filepath.Join(t.TempDir(), "baselines")
	const size = 1 << 30
	first, second := filepath.Join(dir, "1.img"), filepath.Join(dir, "2.img")
	if err := CreateDisk(ctx, first, size, tmpls); err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(tmpls, "blank-1073741824.img")
	before, err := os.Stat(tmpl)
	if err != nil {
		t.Fatalf("no template: %v", err)
	}
	checkBlankDisk(t, first, size)

	// The guest writes the first disk: the template and the next disk
	// stay blank.
	f, err := os.OpenFile(first, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xee}, 8192), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := CreateDisk(ctx, second, size, tmpls); err != nil {
		t.Fatal(err)
	}
	checkBlankDisk(t, second, size)
	after, err := os.Stat(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Error("the template was made again for a second disk of the same size")
	}
	head := make([]byte, 8192)
	tf, err := os.Open(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tf.ReadAt(head, 0)
	tf.Close()
	if err != nil || bytes.Contains(head, []byte{0xee, 0xee}) {
		t.Errorf("a write to a disk reached its template (%v)", err)
	}

	// A template cut short is made again.
	if err := os.Truncate(tmpl, 4096); err != nil {
		t.Fatal(err)
	}
	third := filepath.Join(dir, "3.img")
	if err := CreateDisk(ctx, third, size, tmpls); err != nil {
		t.Fatal(err)
	}
	checkBlankDisk(t, third, size)
	if err := CreateDisk(ctx, third, size, tmpls); err == nil {
		t.Error("CreateDisk overwrote an existing file")
	}
	if left, _ := filepath.Glob(filepath.Join(tmpls, ".blank-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
