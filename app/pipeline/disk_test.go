package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestCreateDisk(t *testing.T) {
	p := filepath.Join(t.TempDir(), DiskFile)
	const size = 1 << 30
	if err := CreateDisk(context.Background(), p, size); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Errorf("disk is %d bytes, want %d", fi.Size(), size)
	}
	// Sparse: only metadata is allocated.
	if used := fi.Sys().(*syscall.Stat_t).Blocks * 512; used > 64<<20 {
		t.Errorf("a fresh 1 GiB disk uses %d bytes on the host; want it sparse", used)
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
	if err := CreateDisk(context.Background(), p, size); err == nil {
		t.Error("CreateDisk overwrote an existing file")
	}
}
