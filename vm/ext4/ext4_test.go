package ext4

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestFormatIsSparseAndReadable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "upper.img")
	const size = 8 << 30
	if err := Format(p, size, "upper"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Errorf("size %d, want %d", fi.Size(), size)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if used := st.Blocks * 512; used > 8<<20 {
			t.Errorf("the empty file system takes %d bytes of the host's disk, want a sparse file under 8 MiB", used)
		}
	}
	// e2fsck finds nothing to fix (the guest's kernel mounting it is
	// what the VM tests show).
	e2fsck := lookSbin(t, "e2fsck")
	out, err := exec.Command(e2fsck, "-fn", p).CombinedOutput()
	if err != nil {
		t.Errorf("e2fsck -fn: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "upper: 10/") {
		t.Errorf("e2fsck does not see the label and the 10 inodes of an empty file system:\n%s", out)
	}
}

func TestFormatRefusesAnExistingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.img")
	if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Format(p, 64<<20, "x"); err == nil {
		t.Fatal("formatted over an existing file")
	}
	if b, _ := os.ReadFile(p); string(b) != "keep" {
		t.Errorf("the existing file changed: %q", b)
	}
}

// lookSbin finds a host tool the test checks with, also in the sbin
// directories a non-root PATH lacks.
func lookSbin(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return filepath.Join(d, name)
		}
	}
	t.Fatalf("%s not found: install e2fsprogs (scripts/setup-debian does)", name)
	return ""
}
