package pipeline

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// The attack: another local user reads the user's files through
// Airlock's home. A project file that was 0600 (a database password) is
// snapshotted into the content store; the home and the folders that hold
// the user's data are 0700 and the object 0400, so it stays the user's.
func TestSnapshotKeepsFilesPrivate(t *testing.T) {
	h := filepath.Join(t.TempDir(), "airlock")
	s, err := sandbox.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	writeTree(t, project, map[string]string{"config/database.yml": "password: hunter2\n"})
	if err := os.Chmod(filepath.Join(project, "config/database.yml"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, err := Snapshot(context.Background(), s, project, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := base.Manifest.Lookup("config/database.yml")
	if !ok {
		t.Fatal("config/database.yml is not in the baseline")
	}
	l := home.Layout{Root: h}
	for _, dir := range []string{h, l.Objects(), l.Sandboxes()} {
		if perm := mode(t, dir); perm != 0o700 {
			t.Errorf("%s is %#o, want 0700: other users could list or read it", dir, perm)
		}
	}
	obj, err := s.Objects().Path(e.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if perm := mode(t, obj); perm != 0o400 {
		t.Errorf("the object of config/database.yml is %#o, want 0400", perm)
	}
	for d := filepath.Dir(obj); d != h; d = filepath.Dir(d) {
		if perm := mode(t, d); perm&0o077 != 0 {
			t.Errorf("%s is %#o: open to other users", d, perm)
		}
	}
	// Reading it back still works (apply, review, the disk builder).
	if data, err := sandbox.ReadObject(s.Objects(), e.SHA256); err != nil || string(data) != "password: hunter2\n" {
		t.Errorf("read the object back: %q, %v", data, err)
	}
}

// A home made by an older Airlock (0755, objects/ 0755, objects 0444) is
// tightened when it is opened: the home and objects/ become 0700, which
// puts the old objects out of other users' reach without walking them.
func TestOpenTightensAnOldHome(t *testing.T) {
	h := filepath.Join(t.TempDir(), "airlock")
	l := home.Layout{Root: h}
	old := filepath.Join(l.Objects(), "ab", "cd")
	for _, d := range []string{h, l.Objects(), filepath.Dir(old), l.Sandboxes(), l.Cache(), l.Runs()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(old, []byte("secret"), 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.Open(h); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{h, l.Objects(), l.Sandboxes(), l.Cache(), l.Runs()} {
		if perm := mode(t, dir); perm != 0o700 {
			t.Errorf("after Open, %s is %#o, want 0700", dir, perm)
		}
	}
	if perm := mode(t, old); perm != 0o444 {
		t.Errorf("an old object is %#o: Open should not walk the objects (objects/ 0700 protects them)", perm)
	}
}

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}
