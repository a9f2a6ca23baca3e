//go:build unix

package review

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// withUmask runs the test under umask m, put back after.
func withUmask(t *testing.T, m int) {
	old := syscall.Umask(m)
	t.Cleanup(func() { syscall.Umask(old) })
}

// TestApplyMasksGuestModes is the attack: the guest makes its files 0777
// and 0666 and a directory 0777, and asks for a directory 0700 and a file
// 0600. Only the owner's execute bit and the user's umask decide.
func TestApplyMasksGuestModes(t *testing.T) {
	for _, tc := range []struct {
		umask int
		want  map[string]os.FileMode
	}{
		{0o022, map[string]os.FileMode{"all.sh": 0o755, "world.txt": 0o644, "open": 0o755, "newdir": 0o755, "newdir/f.txt": 0o644, "sub": 0o755, "kept.txt": 0o644}},
		{0o077, map[string]os.FileMode{"all.sh": 0o700, "world.txt": 0o600, "open": 0o700, "newdir": 0o700, "newdir/f.txt": 0o600, "sub": 0o755, "kept.txt": 0o644}},
	} {
		withUmask(t, tc.umask)
		cs := modeChangeset(t)
		project := t.TempDir()
		writeFile(t, project, "kept.txt", "kept\n")
		mkdir(t, project, "sub")
		writeFile(t, project, "sub/x", "x\n")
		if err := os.Chmod(filepath.Join(project, "kept.txt"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(project, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, project)
		jd := journalDir(t)
		if _, err := Apply(context.Background(), project, cs, ApproveAll(cs), ApplyOptions{JournalDir: jd}); err != nil {
			t.Fatal(err)
		}
		got := map[string]os.FileMode{}
		for p := range tc.want {
			fi, err := os.Lstat(filepath.Join(project, p))
			if err != nil {
				t.Fatal(err)
			}
			got[p] = fi.Mode().Perm()
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("umask %03o: modes (-want +got):\n%s", tc.umask, diff)
		}
		if err := Undo(context.Background(), jd); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
			t.Errorf("umask %03o: after undo (-want +got):\n%s", tc.umask, diff)
		}
	}
}

func TestUmaskRead(t *testing.T) {
	withUmask(t, 0o027)
	if got := umask(); got != 0o027 {
		t.Errorf("umask() = %03o, want 027", got)
	}
}
