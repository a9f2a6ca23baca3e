package pipeline

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
)

// testTree is a small project with every kind of entry a base disk holds.
type testEntry struct {
	path    string
	typ     manifest.Type
	mode    fs.FileMode
	content string // files
	target  string // symlinks
}

func testTree() []testEntry {
	big := make([]byte, 300<<10)
	rand.Read(big)
	return []testEntry{
		{path: "README", typ: manifest.File, mode: 0o644, content: "hello\n"},
		{path: "a dir", typ: manifest.Dir, mode: 0o755},
		{path: "a dir/run me.sh", typ: manifest.File, mode: 0o755, content: "#!/bin/sh\necho hi\n"},
		{path: "a dir/ünïcødé ✓.txt", typ: manifest.File, mode: 0o600, content: "unicode\n"},
		{path: "big.bin", typ: manifest.File, mode: 0o644, content: string(big)},
		{path: "deep", typ: manifest.Dir, mode: 0o755},
		{path: "deep/er", typ: manifest.Dir, mode: 0o750},
		{path: "deep/er/est", typ: manifest.Dir, mode: 0o700},
		{path: "empty", typ: manifest.File, mode: 0o444, content: ""},
		{path: "emptydir", typ: manifest.Dir, mode: 0o755},
		{path: "link", typ: manifest.Symlink, mode: manifest.SymlinkMode, target: "a dir/run me.sh"},
		{path: "long link", typ: manifest.Symlink, mode: manifest.SymlinkMode, target: strings.Repeat("../x/", 40) + "far"},
		{path: "same", typ: manifest.File, mode: 0o644, content: "hello\n"},
		{path: "up", typ: manifest.Symlink, mode: manifest.SymlinkMode, target: "../../etc/passwd"},
	}
}

// baseline stores tree's contents in a new store and returns its manifest.
func baseline(t testing.TB, tree []testEntry) (*manifest.Manifest, *objects.Store) {
	t.Helper()
	st, err := objects.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{}
	for _, e := range tree {
		me := manifest.Entry{Path: e.path, Type: e.typ, Mode: e.mode, Target: e.target}
		if e.typ == manifest.File {
			sum, size, err := st.Put(strings.NewReader(e.content))
			if err != nil {
				t.Fatal(err)
			}
			me.SHA256, me.Size = sum, size
		}
		m.Entries = append(m.Entries, me)
	}
	m.Sort()
	return m, st
}

type seen struct {
	Mode     fs.FileMode
	UID, GID int
	Content  string
	Target   string
}

// listDisk returns every entry below dir (a path on the disk image img)
// with its type, permission bits, owner and content or link target, as
// debugfs (e2fsprogs: it reads the disk without mounting it) sees them.
func listDisk(t *testing.T, img, dir string) map[string]seen {
	t.Helper()
	out := map[string]seen{}
	var walk func(dir string)
	walk = func(dir string) {
		for _, line := range strings.Split(strings.TrimSpace(debugfs(t, img, "ls -p "+quote(dir))), "\n") {
			// /inode/mode/uid/gid/name/size/
			f := strings.Split(line, "/")
			if len(f) != 8 {
				t.Fatalf("debugfs ls -p %s: %q", dir, line)
			}
			name := f[5]
			if name == "." || name == ".." || f[1] == "0" {
				continue
			}
			var raw, uid, gid int
			if _, err := fmt.Sscanf(f[2]+" "+f[3]+" "+f[4], "%o %d %d", &raw, &uid, &gid); err != nil {
				t.Fatalf("debugfs ls -p %s: %q: %v", dir, line, err)
			}
			p := path.Join(dir, name)
			s := seen{Mode: fs.FileMode(raw & 0o777), UID: uid, GID: gid}
			if raw&0o7000 != 0 {
				s.Mode |= fs.ModeSetuid // never expected: shows as a difference
			}
			switch raw & 0o170000 {
			case 0o040000:
				s.Mode |= fs.ModeDir
			case 0o120000:
				s.Mode |= fs.ModeSymlink
				st := debugfs(t, img, "stat "+quote(p))
				if i := strings.Index(st, "Fast link dest: \""); i >= 0 {
					s.Target = strings.TrimSuffix(strings.TrimSpace(st[i+len("Fast link dest: \""):]), "\"")
				} else {
					s.Target = debugfs(t, img, "cat "+quote(p))
				}
			case 0o100000:
				s.Content = debugfs(t, img, "cat "+quote(p))
			default:
				t.Errorf("%s: mode %o", p, raw)
			}
			out[strings.TrimPrefix(p, "/")] = s
			if s.Mode.IsDir() {
				walk(p)
			}
		}
	}
	walk(dir)
	return out
}

func quote(p string) string { return `"` + p + `"` }

// debugfs runs one debugfs request on the image.
func debugfs(t *testing.T, img, req string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(testenv.Sbin(t, "debugfs"), "-R", req, img)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.Contains(stderr.String(), "not found") {
		t.Fatalf("debugfs -R %q: %v\n%s", req, err, stderr.String())
	}
	return string(out)
}

func makeDisk(t *testing.T, dir string, m *manifest.Manifest, st *objects.Store, uid, gid int) BaseDisk {
	t.Helper()
	d, err := MakeBaseDisk(context.Background(), BaseDiskRequest{Dir: dir, Manifest: m, Objects: st, UID: uid, GID: gid})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBaseDiskLayout writes a disk and reads it back in pure Go: the
// root, the ID file, and under tree/ exactly the manifest's entries with
// their owner, modes, contents and link targets.
func TestBaseDiskLayout(t *testing.T) {
	tree := testTree()
	m, st := baseline(t, tree)
	dir := filepath.Join(t.TempDir(), "cache", "baselines")
	d := makeDisk(t, dir, m, st, 1000, 1001)

	id, err := BaseDiskID(m, 1000, 1001)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != id || len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Errorf("ID %q, want BaseDiskID %q (64 lower-case hex digits)", d.ID, id)
	}
	if d.Path != filepath.Join(dir, id+".img") {
		t.Errorf("path %s, want %s", d.Path, filepath.Join(dir, id+".img"))
	}
	fi, err := os.Stat(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o400 {
		t.Errorf("image mode %v, want 0400", fi.Mode().Perm())
	}
	if fi.Size() != MinBaseDiskSize {
		t.Errorf("image size %d, want the 1 GiB class", fi.Size())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 > 16<<20 {
		t.Errorf("the image takes %d bytes of the host's disk: want it sparse", st.Blocks*512)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("cache dir: %v, %v; want 0700", di.Mode(), err)
	}
	if err := VerifyBaseDisk(d.Path); err != nil {
		t.Fatal(err)
	}

	root := listDisk(t, d.Path, "/")
	if got := root["id"]; got != (seen{Mode: 0o444, Content: id}) {
		t.Errorf("id file: %+v", got)
	}
	if got := root["tree"]; got != (seen{Mode: fs.ModeDir | 0o755, UID: 1000, GID: 1001}) {
		t.Errorf("tree dir: %+v", got)
	}
	var top []string
	for p := range root {
		if !strings.Contains(p, "/") {
			top = append(top, p)
		}
	}
	slices.Sort(top)
	if want := []string{"id", "lost+found", "tree"}; !slices.Equal(top, want) {
		t.Errorf("the root holds %q, want %q", top, want)
	}
	if st := debugfs(t, d.Path, "stat /"); !strings.Contains(st, "Mode:  0755") || !strings.Contains(st, "User:     0   Group:     0 ") {
		t.Errorf("root, want 0755 0:0:\n%s", st)
	}

	want := map[string]seen{}
	for _, e := range tree {
		s := seen{Mode: e.mode, UID: 1000, GID: 1001, Content: e.content, Target: e.target}
		switch e.typ {
		case manifest.Dir:
			s.Mode |= fs.ModeDir
		case manifest.Symlink:
			s.Mode |= fs.ModeSymlink
		}
		want["tree/"+e.path] = s
	}
	if diff := cmp.Diff(want, listDisk(t, d.Path, "/tree")); diff != "" {
		t.Errorf("tree/ on the disk (-want +got):\n%s", diff)
	}

	// e2fsck, which knows ext4 better than any reader here, finds nothing.
	if out, err := exec.Command(testenv.Sbin(t, "e2fsck"), "-fn", d.Path).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn: %v\n%s", err, out)
	}

	if rec := record(t, d); rec.Size != fi.Size() || rec.FSSize <= 0 || rec.FSSize >= rec.Size {
		t.Errorf("record %+v for an image of %d bytes", rec, fi.Size())
	}
}

// TestBaseDiskIDs: the ID changes with the content, a mode, the owner;
// the same baseline gives the same disk, byte for byte, in another cache.
func TestBaseDiskIDs(t *testing.T) {
	m, st := baseline(t, testTree())
	id := func(m *manifest.Manifest, uid, gid int) string {
		s, err := BaseDiskID(m, uid, gid)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := id(m, 1000, 1000)
	m2 := &manifest.Manifest{Entries: slices.Clone(m.Entries)}
	m2.Entries[0].Mode = 0o600
	for name, other := range map[string]string{
		"uid": id(m, 1001, 1000), "gid": id(m, 1000, 1001), "mode": id(m2, 1000, 1000),
	} {
		if other == base {
			t.Errorf("changing the %s keeps the ID", name)
		}
	}
	a := makeDisk(t, t.TempDir(), m, st, 1000, 1000)
	b := makeDisk(t, t.TempDir(), m, st, 1000, 1000)
	if a.ID != b.ID || record(t, a) != record(t, b) {
		t.Errorf("two writes of the same baseline differ: %+v, %+v", record(t, a), record(t, b))
	}
}

// record is the disk's record (which VerifyBaseDisk checks the image
// against) without its stamp, which is of one file: two writes of a disk
// have the same records but for it.
func record(t *testing.T, d BaseDisk) baseDiskRecord {
	t.Helper()
	rec, err := readBaseDiskRecord(recordPath(d.Path))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Stamp == nil {
		t.Errorf("the record of %s has no stamp", d.Path)
	}
	rec.Stamp = nil
	return rec
}

func TestBaseDiskSize(t *testing.T) {
	for _, c := range []struct{ fs, want int64 }{
		{0, 1 << 30}, {1, 1 << 30}, {1 << 30, 1 << 30}, {1<<30 + 1, 2 << 30}, {3 << 30, 4 << 30}, {1 << 40, 1 << 40},
	} {
		if got := BaseDiskSize(c.fs); got != c.want {
			t.Errorf("BaseDiskSize(%d) = %d, want %d", c.fs, got, c.want)
		}
	}
}

// TestBaseDiskCacheHit: a second call finds the disk and leaves it as it
// is.
func TestBaseDiskCacheHit(t *testing.T) {
	m, st := baseline(t, testTree())
	dir := t.TempDir()
	d := makeDisk(t, dir, m, st, 1000, 1000)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(d.Path, old, old); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(d.Path)
	var logs bytes.Buffer
	again, err := MakeBaseDisk(context.Background(), BaseDiskRequest{Dir: dir, Manifest: m, Objects: st, UID: 1000, GID: 1000,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(again.Path)
	if again != d || !after.ModTime().Equal(old) || !os.SameFile(before, after) {
		t.Errorf("the cached disk was written again: %v → %v", before.ModTime(), after.ModTime())
	}
	if logs.Len() != 0 {
		t.Errorf("a cache hit warned: %s", logs.String())
	}
}

// TestBaseDiskPrune: writing a disk removes those not used for
// BaseDiskKeep, keeps a recently used one (a cache hit counts as a use)
// and the one just written, and keeps no more than BaseDiskKeepCount.
func TestBaseDiskPrune(t *testing.T) {
	m, st := baseline(t, testTree())
	dir := t.TempDir()
	stale := makeDisk(t, dir, m, st, 1, 1)
	used := makeDisk(t, dir, m, st, 2, 2)
	long := time.Now().Add(-BaseDiskKeep - time.Hour)
	for _, d := range []BaseDisk{stale, used} {
		if err := os.Chtimes(recordPath(d.Path), long, long); err != nil {
			t.Fatal(err)
		}
	}
	makeDisk(t, dir, m, st, 2, 2) // a hit: used now
	fresh := makeDisk(t, dir, m, st, 3, 3)
	for d, want := range map[BaseDisk]bool{stale: false, used: true, fresh: true} {
		for _, p := range []string{d.Path, recordPath(d.Path)} {
			if _, err := os.Stat(p); (err == nil) != want {
				t.Errorf("%s: present %v, want %v", filepath.Base(p), err == nil, want)
			}
		}
	}

	// Many recent disks: the newest BaseDiskKeepCount stay.
	dir2 := t.TempDir()
	for i := range BaseDiskKeepCount + 3 {
		d := makeDisk(t, dir2, m, st, 10+i, 10+i)
		at := time.Now().Add(time.Duration(i-100) * time.Minute)
		os.Chtimes(recordPath(d.Path), at, at)
	}
	imgs, _ := filepath.Glob(filepath.Join(dir2, "*.img"))
	recs, _ := filepath.Glob(filepath.Join(dir2, "*.json"))
	if len(imgs) != BaseDiskKeepCount || len(recs) != BaseDiskKeepCount {
		t.Errorf("%d images and %d records kept, want %d", len(imgs), len(recs), BaseDiskKeepCount)
	}
}

// TestBaseDiskDamaged: an image changed on the host in any way is caught
// by VerifyBaseDisk, and MakeBaseDisk writes it again with a warning.
func TestBaseDiskDamaged(t *testing.T) {
	m, st := baseline(t, testTree())
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, d BaseDisk, rec baseDiskRecord)
	}{
		{"flipped byte", func(t *testing.T, d BaseDisk, rec baseDiskRecord) {
			editImage(t, d.Path, func(f *os.File) error {
				b := make([]byte, 1)
				if _, err := f.ReadAt(b, rec.FSSize/2); err != nil {
					return err
				}
				b[0] ^= 0x20
				_, err := f.WriteAt(b, rec.FSSize/2)
				return err
			})
		}},
		{"truncated", func(t *testing.T, d BaseDisk, rec baseDiskRecord) {
			editImage(t, d.Path, func(f *os.File) error { return f.Truncate(rec.FSSize / 2) })
		}},
		{"truncated to the file system", func(t *testing.T, d BaseDisk, rec baseDiskRecord) {
			editImage(t, d.Path, func(f *os.File) error { return f.Truncate(rec.FSSize) })
		}},
		{"data in the tail", func(t *testing.T, d BaseDisk, rec baseDiskRecord) {
			if !rec.Holes {
				t.Skip("this file system does not show holes (no SEEK_DATA)")
			}
			editImage(t, d.Path, func(f *os.File) error {
				_, err := f.WriteAt([]byte("appended"), rec.Size-4096)
				return err
			})
		}},
		{"grown", func(t *testing.T, d BaseDisk, rec baseDiskRecord) {
			editImage(t, d.Path, func(f *os.File) error {
				_, err := f.WriteAt([]byte("appended"), rec.Size)
				return err
			})
		}},
		{"missing record", func(t *testing.T, d BaseDisk, rec baseDiskRecord) {
			if err := os.Remove(recordPath(d.Path)); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbled record", func(t *testing.T, d BaseDisk, rec baseDiskRecord) {
			if err := os.WriteFile(recordPath(d.Path), []byte(`{"format":1,"fs_size":-4`), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"record of another disk", func(t *testing.T, d BaseDisk, rec baseDiskRecord) {
			rec.SHA256 = strings.Repeat("0", 64)
			if err := os.WriteFile(recordPath(d.Path), fmt.Appendf(nil, `{"format":1,"fs_size":%d,"size":%d,"sha256":%q,"holes":%t}`, rec.FSSize, rec.Size, rec.SHA256, rec.Holes), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			d := makeDisk(t, dir, m, st, 1000, 1000)
			rec := record(t, d)
			c.damage(t, d, rec)
			if err := VerifyBaseDisk(d.Path); !errors.Is(err, ErrBaseDiskDamaged) {
				t.Fatalf("VerifyBaseDisk = %v, want ErrBaseDiskDamaged", err)
			}
			var logs bytes.Buffer
			again, err := MakeBaseDisk(context.Background(), BaseDiskRequest{Dir: dir, Manifest: m, Objects: st, UID: 1000, GID: 1000,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "damaged") {
				t.Errorf("no warning about the damaged disk: %q", logs.String())
			}
			if err := VerifyBaseDisk(again.Path); err != nil {
				t.Fatal(err)
			}
			if now := record(t, again); now != rec {
				t.Errorf("the disk written again differs from the first: %+v, %+v", now, rec)
			}
			assertOnlyDisks(t, dir, again.ID)
		})
	}
}

// editImage opens the read-only image for writing, as a user on the host
// might.
func editImage(t *testing.T, p string, edit func(*os.File) error) {
	t.Helper()
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := edit(f); err != nil {
		t.Fatal(err)
	}
}

// assertOnlyDisks checks dir holds the lock and the image and record of
// each id, and nothing else (no temporary files).
func assertOnlyDisks(t *testing.T, dir string, ids ...string) {
	t.Helper()
	want := []string{baseDiskLock}
	for _, id := range ids {
		want = append(want, id+".img", id+".json")
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s holds %q, want %q", dir, got, want)
	}
}

// TestBaseDiskBadStore: a baseline whose content is missing from the
// store, or is there with another size or other bytes, fails with an
// error naming the file, and leaves nothing in the cache.
func TestBaseDiskBadStore(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, st *objects.Store, e manifest.Entry)
		want   string
	}{
		{"missing", func(t *testing.T, st *objects.Store, e manifest.Entry) {
			p, _ := st.Path(e.SHA256)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, "not in the store"},
		{"shorter", func(t *testing.T, st *objects.Store, e manifest.Entry) {
			rewriteObject(t, st, e, func(b []byte) []byte { return b[:len(b)-10] })
		}, "the baseline says"},
		{"longer", func(t *testing.T, st *objects.Store, e manifest.Entry) {
			rewriteObject(t, st, e, func(b []byte) []byte { return append(b, "more"...) })
		}, "the baseline says"},
		{"other bytes", func(t *testing.T, st *objects.Store, e manifest.Entry) {
			rewriteObject(t, st, e, func(b []byte) []byte { b[100] ^= 1; return b })
		}, "hashes to"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, st := baseline(t, testTree())
			e, ok := m.Lookup("big.bin")
			if !ok {
				t.Fatal("no big.bin")
			}
			c.damage(t, st, e)
			dir := t.TempDir()
			_, err := MakeBaseDisk(context.Background(), BaseDiskRequest{Dir: dir, Manifest: m, Objects: st, UID: 1000, GID: 1000})
			if err == nil {
				t.Fatal("made a disk from a damaged store")
			}
			if !strings.Contains(err.Error(), "big.bin") || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "snapshot again") {
				t.Errorf("error %q does not name the file, say %q and what to do", err, c.want)
			}
			assertOnlyDisks(t, dir)
		})
	}
}

func rewriteObject(t *testing.T, st *objects.Store, e manifest.Entry, edit func([]byte) []byte) {
	t.Helper()
	p, _ := st.Path(e.SHA256)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o600)
	if err := os.WriteFile(p, edit(b), 0o400); err != nil {
		t.Fatal(err)
	}
}

// TestBaseDiskBadInput: an invalid manifest or owner is refused before
// anything is written.
func TestBaseDiskBadInput(t *testing.T) {
	m, st := baseline(t, testTree())
	unsorted := &manifest.Manifest{Entries: slices.Clone(m.Entries)}
	slices.Reverse(unsorted.Entries)
	escape := &manifest.Manifest{Entries: []manifest.Entry{{Path: "../x", Type: manifest.Dir, Mode: 0o755}}}
	orphan := &manifest.Manifest{Entries: []manifest.Entry{{Path: "a/b", Type: manifest.Dir, Mode: 0o755}}}
	setuid := &manifest.Manifest{Entries: []manifest.Entry{{Path: "a", Type: manifest.Dir, Mode: 0o755 | fs.ModeSetuid}}}
	for _, c := range []struct {
		name     string
		m        *manifest.Manifest
		uid, gid int
	}{
		{"unsorted", unsorted, 0, 0},
		{"escape", escape, 0, 0},
		{"no parent", orphan, 0, 0},
		{"setuid", setuid, 0, 0},
		{"negative uid", m, -1, 0},
		{"huge gid", m, 0, 1 << 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "c")
			if _, err := MakeBaseDisk(context.Background(), BaseDiskRequest{Dir: dir, Manifest: c.m, Objects: st, UID: c.uid, GID: c.gid}); err == nil {
				t.Fatal("made a disk")
			}
			if _, err := os.Stat(dir); err == nil {
				assertOnlyDisks(t, dir)
			}
		})
	}
}

// TestBaseDiskConcurrent: the attempts of a fan-out ask for the same disk
// at once; all get it, whole, written once.
func TestBaseDiskConcurrent(t *testing.T) {
	m, st := baseline(t, testTree())
	dir := t.TempDir()
	var logs bytes.Buffer // slog's handler writes one record at a time
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var wg sync.WaitGroup
	disks := make([]BaseDisk, 8)
	errs := make([]error, 8)
	for i := range disks {
		wg.Go(func() {
			disks[i], errs[i] = MakeBaseDisk(context.Background(), BaseDiskRequest{Dir: dir, Manifest: m, Objects: st, UID: 1000, GID: 1000, Logger: log})
			if errs[i] == nil {
				errs[i] = VerifyBaseDisk(disks[i].Path)
			}
		})
	}
	wg.Wait()
	for i := range disks {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if disks[i] != disks[0] {
			t.Errorf("caller %d got %+v, caller 0 %+v", i, disks[i], disks[0])
		}
	}
	if n := strings.Count(logs.String(), "base disk written"); n != 1 {
		t.Errorf("the disk was written %d times, want once:\n%s", n, logs.String())
	}
	assertOnlyDisks(t, dir, disks[0].ID)
}

// TestBaseDiskCancelled: a write stopped by its context, at any point,
// leaves nothing behind.
func TestBaseDiskCancelled(t *testing.T) {
	tree := testTree()
	for i := range 8 {
		b := make([]byte, 1<<20)
		rand.Read(b)
		tree = append(tree, testEntry{path: fmt.Sprintf("z%02d", i), typ: manifest.File, mode: 0o644, content: string(b)})
	}
	m, st := baseline(t, tree)
	for _, after := range []int64{1, 5, 20, 40} {
		t.Run(fmt.Sprint(after), func(t *testing.T) {
			dir := t.TempDir()
			ctx := newCountdown(after)
			_, err := MakeBaseDisk(ctx, BaseDiskRequest{Dir: dir, Manifest: m, Objects: st, UID: 1000, GID: 1000})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("MakeBaseDisk = %v, want context.Canceled", err)
			}
			assertOnlyDisks(t, dir)
		})
	}
}

// countdown is a context that ends on its nth look at Err: mid-write, at
// a point the test chooses, without timing.
type countdown struct {
	context.Context
	left atomic.Int64
	done chan struct{}
	once sync.Once
}

func newCountdown(n int64) *countdown {
	c := &countdown{Context: context.Background(), done: make(chan struct{})}
	c.left.Store(n)
	return c
}

func (c *countdown) Err() error {
	if c.left.Add(-1) > 0 {
		return nil
	}
	c.once.Do(func() { close(c.done) })
	return context.Canceled
}

func (c *countdown) Done() <-chan struct{} { return c.done }

// TestBaseDiskRoom: a disk that does not fit says how much it needs, how
// much there is and what to remove.
func TestBaseDiskRoom(t *testing.T) {
	m, _ := baseline(t, testTree())
	need := baseDiskNeed(fullLayer(m))
	if need < 300<<10 {
		t.Errorf("need %d for a tree holding 300 KiB", need)
	}
	if err := checkBaseDiskRoom("/cache", need, need); err != nil {
		t.Errorf("refused with just enough room: %v", err)
	}
	if err := checkBaseDiskRoom("/cache", need, -1); err != nil {
		t.Errorf("refused when free space is unknown: %v", err)
	}
	err := checkBaseDiskRoom("/cache", 5e9, 1e9)
	if err == nil {
		t.Fatal("accepted a disk larger than the free space")
	}
	for _, s := range []string{"5000 MB", "1000 MB", "/cache", "airlock rm", ".img"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

// TestBaseDiskProgress: a write that takes over a second reports bytes,
// ending with the total.
func TestBaseDiskProgress(t *testing.T) {
	var got [][2]int64
	p := &byteProgress{report: func(d, n int64) { got = append(got, [2]int64{d, n}) }, total: 100, start: time.Now()}
	p.add(10)
	if len(got) != 0 {
		t.Fatalf("reported within the first second: %v", got)
	}
	p.start = time.Now().Add(-2 * time.Second)
	p.add(20)
	p.add(5) // within a tenth of a second of the last
	p.finish()
	if want := [][2]int64{{30, 100}, {100, 100}}; !slices.Equal(got, want) {
		t.Errorf("reports %v, want %v", got, want)
	}
	quiet := &byteProgress{report: func(d, n int64) { t.Errorf("a fast write reported %d/%d", d, n) }, total: 1, start: time.Now()}
	quiet.add(1)
	quiet.finish()
}
