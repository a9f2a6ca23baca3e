package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
)

// stack is what an overlay shows of layer over base (both sorted): the
// base's entries not hidden by the layer (a whiteout or entry at their
// path, a whiteout, non-directory or opaque directory above them), then
// the layer's own entries but whiteouts.
func stack(base *manifest.Manifest, layer []layerEntry) *manifest.Manifest {
	top := map[string]layerEntry{}
	for _, e := range layer {
		top[e.Path] = e
	}
	hidden := func(p string) bool {
		if _, ok := top[p]; ok {
			return true
		}
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if e, ok := top[dir]; ok && (e.Whiteout || e.Type != manifest.Dir || e.Opaque) {
				return true
			}
		}
		return false
	}
	out := &manifest.Manifest{}
	for _, e := range base.Entries {
		if !hidden(e.Path) {
			out.Entries = append(out.Entries, e)
		}
	}
	for _, e := range layer {
		if !e.Whiteout {
			out.Entries = append(out.Entries, e.Entry)
		}
	}
	out.Sort()
	return out
}

// edits are the kinds of change a delta carries, each applied to a copy
// of tree.
var edits = []struct {
	name string
	edit func(tree []testEntry) []testEntry
}{
	{"modify", func(tree []testEntry) []testEntry {
		return setEntry(tree, testEntry{path: "a dir/run me.sh", typ: manifest.File, mode: 0o755, content: "#!/bin/sh\necho changed\n"})
	}},
	{"add", func(tree []testEntry) []testEntry {
		tree = setEntry(tree, testEntry{path: "new dir", typ: manifest.Dir, mode: 0o700})
		return setEntry(tree, testEntry{path: "new dir/new file", typ: manifest.File, mode: 0o644, content: "new\n"})
	}},
	{"delete", func(tree []testEntry) []testEntry {
		return dropEntries(tree, "README", "deep")
	}},
	{"file to directory", func(tree []testEntry) []testEntry {
		tree = dropEntries(tree, "same")
		tree = setEntry(tree, testEntry{path: "same", typ: manifest.Dir, mode: 0o755})
		return setEntry(tree, testEntry{path: "same/inside", typ: manifest.File, mode: 0o644, content: "inside\n"})
	}},
	{"directory to file", func(tree []testEntry) []testEntry {
		tree = dropEntries(tree, "a dir")
		return setEntry(tree, testEntry{path: "a dir", typ: manifest.File, mode: 0o644, content: "was a directory\n"})
	}},
	{"mode", func(tree []testEntry) []testEntry {
		tree = setEntry(tree, testEntry{path: "big.bin", typ: manifest.File, mode: 0o600, content: entryOf(tree, "big.bin").content})
		return setEntry(tree, testEntry{path: "emptydir", typ: manifest.Dir, mode: 0o700})
	}},
	{"link to file", func(tree []testEntry) []testEntry {
		tree = dropEntries(tree, "link")
		return setEntry(tree, testEntry{path: "link", typ: manifest.File, mode: 0o644, content: "no longer a link\n"})
	}},
}

func entryOf(tree []testEntry, p string) testEntry {
	for _, e := range tree {
		if e.path == p {
			return e
		}
	}
	return testEntry{}
}

// setEntry puts e in tree, in place of the entry at its path.
func setEntry(tree []testEntry, e testEntry) []testEntry {
	out := dropEntries(tree, "")
	for i, x := range out {
		if x.path == e.path {
			out[i] = e
			return out
		}
	}
	return append(out, e)
}

// dropEntries removes the entries at paths and below them.
func dropEntries(tree []testEntry, paths ...string) []testEntry {
	var out []testEntry
	for _, e := range tree {
		gone := false
		for _, p := range paths {
			if p != "" && (e.path == p || strings.HasPrefix(e.path, p+"/")) {
				gone = true
			}
		}
		if !gone {
			out = append(out, e)
		}
	}
	return out
}

// manifests returns the manifests of trees, their contents in one store.
func manifests(t *testing.T, trees ...[]testEntry) ([]*manifest.Manifest, *objects.Store) {
	t.Helper()
	st, err := objects.Open(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*manifest.Manifest
	for _, tree := range trees {
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
		out = append(out, m)
	}
	return out, st
}

// TestDeltaEntries: for each kind of change, and all of them at once,
// the delta stacked over the base shows exactly the new tree, with a
// whiteout for what is gone only at the top of what is gone, opaque
// directories where something else was, and nothing unchanged but the
// directories above a change.
func TestDeltaEntries(t *testing.T) {
	tree := testTree()
	all := tree
	for _, e := range edits {
		all = e.edit(all)
	}
	cases := append(edits, struct {
		name string
		edit func([]testEntry) []testEntry
	}{"all at once", func([]testEntry) []testEntry { return all }})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms, _ := manifests(t, tree, c.edit(tree))
			base, target := ms[0], ms[1]
			layer := deltaEntries(base, target)
			if diff := cmp.Diff(target, stack(base, layer)); diff != "" {
				t.Errorf("the delta over the base is not the new tree (-want +got):\n%s", diff)
			}
			for i, e := range layer {
				if i > 0 && layer[i-1].Path >= e.Path {
					t.Errorf("not sorted: %q after %q", e.Path, layer[i-1].Path)
				}
				if e.Whiteout {
					if _, ok := base.Lookup(e.Path); !ok {
						t.Errorf("whiteout of %s, which the base lacks", e.Path)
					}
					if dir := path.Dir(e.Path); dir != "." {
						if p, ok := target.Lookup(dir); !ok || p.Type != manifest.Dir {
							t.Errorf("whiteout of %s below a directory that is gone", e.Path)
						}
					}
					continue
				}
				old, inBase := base.Lookup(e.Path)
				if e.Opaque != (e.Type == manifest.Dir && inBase && old.Type != manifest.Dir) {
					t.Errorf("%s: opaque %t, was %v", e.Path, e.Opaque, old.Type)
				}
				if inBase && old == e.Entry && e.Type != manifest.Dir {
					t.Errorf("%s: unchanged, but in the delta", e.Path)
				}
			}
		})
	}
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			next := tree
			for range 1 + rng.IntN(4) {
				next = edits[rng.IntN(len(edits))].edit(next)
			}
			ms, _ := manifests(t, tree, next)
			if diff := cmp.Diff(ms[1], stack(ms[0], deltaEntries(ms[0], ms[1]))); diff != "" {
				t.Fatalf("the delta over the base is not the new tree (-want +got):\n%s", diff)
			}
		}
	})
	t.Run("same", func(t *testing.T) {
		ms, _ := manifests(t, tree, tree)
		if layer := deltaEntries(ms[0], ms[1]); len(layer) != 0 {
			t.Errorf("a delta of an unchanged tree holds %d entries", len(layer))
		}
	})
}

// TestDeltaDiskLayout writes the delta disk of every kind of change and
// reads it back with debugfs: the id and base files, whiteouts as
// character devices 0/0, the opaque directory's xattr, the changed
// entries, and nothing of what did not change.
func TestDeltaDiskLayout(t *testing.T) {
	tree := testTree()
	next := tree
	for _, e := range edits {
		next = e.edit(next)
	}
	ms, st := manifests(t, tree, next)
	dir := t.TempDir()
	req := BaseDiskRequest{Dir: dir, Project: "/p", Manifest: ms[0], Objects: st, UID: 1000, GID: 1000}
	first, err := MakeBaseLayers(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	req.Manifest = ms[1]
	l, err := MakeBaseLayers(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if l.Base != first.Base || l.Squashed {
		t.Fatalf("the second baseline's base is %+v, want the first's %+v", l, first)
	}
	id, _ := BaseDiskID(ms[1], 1000, 1000)
	if l.ID != id || l.Delta.ID != DeltaDiskID(first.Base.ID, id) {
		t.Errorf("IDs %+v, want baseline %s", l, id)
	}
	if got := debugfs(t, l.Delta.Path, "cat "+BaseDiskIDFile); got != id {
		t.Errorf("the delta's id file holds %q, want %q", got, id)
	}
	if got := debugfs(t, l.Delta.Path, "cat "+DeltaDiskBaseFile); got != first.Base.ID {
		t.Errorf("the delta's base file holds %q, want %q", got, first.Base.ID)
	}
	for _, p := range []string{"README", "deep"} {
		s := debugfs(t, l.Delta.Path, "stat "+quote("/tree/"+p))
		if !strings.Contains(s, "Type: character special") || !strings.Contains(s, "Device major/minor number: 00:00") {
			t.Errorf("%s is not a whiteout:\n%s", p, s)
		}
	}
	if s := debugfs(t, l.Delta.Path, "ea_get /tree/same trusted.overlay.opaque"); !strings.Contains(s, "y") {
		t.Errorf("same (a file become a directory) is not opaque: %q", s)
	}
	if got := debugfs(t, l.Delta.Path, "cat "+quote("/tree/same/inside")); got != "inside\n" {
		t.Errorf("same/inside holds %q", got)
	}
	ls := debugfs(t, l.Delta.Path, "ls -p /tree")
	for _, unchanged := range []string{"/up/", "/long link/", "/empty/"} {
		if strings.Contains(ls, unchanged) {
			t.Errorf("the delta holds %s, which did not change:\n%s", unchanged, ls)
		}
	}

	// The same baseline again finds both disks.
	again, err := MakeBaseLayers(context.Background(), req)
	if err != nil || again != l {
		t.Errorf("again: %+v, %v; want %+v", again, err, l)
	}
}

// TestBaseLayersSquash: a delta past a quarter of its base gives way to a
// full disk of the baseline, which the next deltas are computed against.
func TestBaseLayersSquash(t *testing.T) {
	var tree []testEntry
	for i := range 2 * squashMinEntries {
		tree = append(tree, testEntry{path: fmt.Sprintf("f%04d", i), typ: manifest.File, mode: 0o644, content: fmt.Sprint(i)})
	}
	small := setEntry(tree, testEntry{path: "f0000", typ: manifest.File, mode: 0o644, content: "edited"})
	large := small
	for i := range squashMinEntries + 1 {
		large = setEntry(large, testEntry{path: fmt.Sprintf("f%04d", i), typ: manifest.File, mode: 0o644, content: "edited again"})
	}
	after := setEntry(large, testEntry{path: "new", typ: manifest.File, mode: 0o644, content: "new"})
	ms, st := manifests(t, tree, small, large, after)
	dir := t.TempDir()
	var got []BaseLayers
	for _, m := range ms {
		l, err := MakeBaseLayers(context.Background(), BaseDiskRequest{Dir: dir, Project: "/p", Manifest: m, Objects: st, UID: 1, GID: 1})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	if got[1].Base != got[0].Base || got[1].Squashed {
		t.Errorf("a one-file edit was not a delta: %+v", got[1])
	}
	if got[2].Base == got[0].Base || !got[2].Squashed || got[2].Base.ID != got[2].ID {
		t.Errorf("a large edit did not squash: %+v", got[2])
	}
	if got[3].Base != got[2].Base || got[3].Squashed {
		t.Errorf("the edit after a squash is not a delta over the new full disk: %+v", got[3])
	}
}

// TestBaseLayersDamaged: a damaged delta disk is written again with a
// warning, and a damaged base disk is never used: the baseline gets a
// full disk of its own, with a warning. An edited manifest beside the
// base (not the base's) is not used either to compute a new delta.
func TestBaseLayersDamaged(t *testing.T) {
	tree := testTree()
	ms, st := manifests(t, tree, edits[0].edit(tree), edits[1].edit(tree))
	for _, c := range []struct {
		name  string
		layer func(l BaseLayers) BaseDisk
		warn  bool
	}{
		{"delta", func(l BaseLayers) BaseDisk { return l.Delta }, true},
		{"base", func(l BaseLayers) BaseDisk { return l.Base }, true},
		{"manifest", func(l BaseLayers) BaseDisk { return BaseDisk{} }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			req := BaseDiskRequest{Dir: dir, Project: "/p", Manifest: ms[0], Objects: st, UID: 1, GID: 1}
			if _, err := MakeBaseLayers(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			req.Manifest = ms[1]
			l, err := MakeBaseLayers(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if d := c.layer(l); d.Path != "" {
				editImage(t, d.Path, func(f *os.File) error {
					_, err := f.WriteAt([]byte{0xff}, 1024+0x100) // in the superblock
					return err
				})
			} else {
				p := filepath.Join(dir, l.Base.ID+manifestSuffix)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, bytes.Replace(b, []byte(`"README"`), []byte(`"READMF"`), 1), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var logs bytes.Buffer
			req.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			if c.name == "manifest" {
				// A delta not yet written: the manifest is read.
				req.Manifest = ms[2]
			}
			again, err := MakeBaseLayers(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if c.warn && (!strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "damaged")) {
				t.Errorf("no warning about the damaged disk: %q", logs.String())
			}
			for _, d := range []BaseDisk{again.Base, again.Delta} {
				if err := VerifyBaseDisk(d.Path); err != nil {
					t.Error(err)
				}
			}
			switch c.name {
			case "delta":
				if again != l {
					t.Errorf("rebuilt %+v, want %+v", again, l)
				}
			default:
				if again.Base == l.Base || again.Base.ID != again.ID {
					t.Errorf("the damaged base was used: %+v", again)
				}
			}
		})
	}
}

// TestBaseLayersCachedDelta: a baseline whose delta disk is cached, and
// one that is the project's full disk, get their layers without the full
// disk's manifest being read (it is gone here); a new delta still needs
// the manifest, and gets a full disk of its own without it or with one
// that is not the disk's.
func TestBaseLayersCachedDelta(t *testing.T) {
	tree := testTree()
	ms, st := manifests(t, tree, edits[0].edit(tree), edits[2].edit(tree))
	// layers makes the layers of ms[0] then ms[1] in a new cache, and
	// returns both and the path of the full disk's manifest.
	layers := func(t *testing.T) (dir string, full, edited BaseLayers, mp string) {
		dir = t.TempDir()
		var got []BaseLayers
		for _, m := range ms[:2] {
			l, err := MakeBaseLayers(context.Background(), BaseDiskRequest{Dir: dir, Project: "/p", Manifest: m, Objects: st, UID: 1, GID: 1})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, l)
		}
		if got[1].Base != got[0].Base {
			t.Fatalf("a one-file edit was not a delta over the project's disk: %+v", got[1])
		}
		return dir, got[0], got[1], filepath.Join(dir, got[0].Base.ID+manifestSuffix)
	}
	dir, full, edited, mp := layers(t)
	if err := os.Remove(mp); err != nil {
		t.Fatal(err)
	}
	for i, want := range []BaseLayers{full, edited} {
		got, err := MakeBaseLayers(context.Background(), BaseDiskRequest{Dir: dir, Project: "/p", Manifest: ms[i], Objects: st, UID: 1, GID: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("baseline %d without the base's manifest: %+v, want the cached %+v", i, got, want)
		}
	}

	// A delta to write: without the manifest, or with one that is not
	// the disk's own, the baseline gets a full disk of its own.
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte // nil: no manifest
	}{
		{"none", nil},
		{"not its own", func(b []byte) []byte { return bytes.Replace(b, []byte(`"README"`), []byte(`"READMF"`), 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, full, _, mp := layers(t)
			b, err := os.ReadFile(mp)
			if err != nil {
				t.Fatal(err)
			}
			if c.edit == nil {
				err = os.Remove(mp)
			} else {
				err = os.WriteFile(mp, c.edit(b), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := MakeBaseLayers(context.Background(), BaseDiskRequest{Dir: dir, Project: "/p", Manifest: ms[2], Objects: st, UID: 1, GID: 1})
			if err != nil {
				t.Fatal(err)
			}
			if got.Base == full.Base || got.Base.ID != got.ID {
				t.Errorf("a delta was computed against an unchecked manifest: %+v", got)
			}
		})
	}
}

// TestBaseLayersWaitForStore: a disk is written only once the baseline's
// files are stored (BaseDiskRequest.Stored), whose error fails the write;
// layers found in the cache do not wait.
func TestBaseLayersWaitForStore(t *testing.T) {
	tree := testTree()
	ms, st := manifests(t, tree, edits[0].edit(tree))
	dir := t.TempDir()
	errStore := errors.New("the store copy failed")
	waits := 0
	req := func(m *manifest.Manifest, err error) BaseDiskRequest {
		return BaseDiskRequest{Dir: dir, Project: "/p", Manifest: m, Objects: st, UID: 1, GID: 1,
			Stored: func() error { waits++; return err }}
	}
	if _, err := MakeBaseLayers(context.Background(), req(ms[0], errStore)); !errors.Is(err, errStore) {
		t.Fatalf("a full disk written though its files were not stored: %v", err)
	}
	full, err := MakeBaseLayers(context.Background(), req(ms[0], nil))
	if err != nil || waits == 1 {
		t.Fatalf("a full disk after its files were stored: %v (waited %d times)", err, waits)
	}
	if _, err := MakeBaseLayers(context.Background(), req(ms[1], errStore)); !errors.Is(err, errStore) {
		t.Fatalf("a delta written though its files were not stored: %v", err)
	}
	edited, err := MakeBaseLayers(context.Background(), req(ms[1], nil))
	if err != nil || edited.Base != full.Base {
		t.Fatalf("the delta after its files were stored: %+v, %v", edited, err)
	}
	waits = 0
	for i, want := range []BaseLayers{full, edited} {
		got, err := MakeBaseLayers(context.Background(), req(ms[i], errStore))
		if err != nil || got != want || waits != 0 {
			t.Errorf("cached layers %d: %+v, %v, waited %d times; want %+v without waiting", i, got, err, waits, want)
		}
	}
}

// TestVerifyBaseDiskStamp: a disk not written since it was found good is
// not read again; an edit that keeps the image's size and mtime still
// changes its ctime and is caught; a chmod (ctime changed, bytes not) is
// read once and recorded again.
func TestVerifyBaseDiskStamp(t *testing.T) {
	m, st := baseline(t, testTree())
	dir := t.TempDir()
	d := makeDisk(t, dir, m, st, 1000, 1000)
	rec := record(t, d)

	// A stamp that matches is trusted: a record whose hash is wrong (as
	// only an edit of the record could make it) passes while the image
	// shows its stamp.
	full, err := readBaseDiskRecord(recordPath(d.Path))
	if err != nil {
		t.Fatal(err)
	}
	fake := full
	fake.SHA256 = strings.Repeat("0", 64)
	if err := writeBaseDiskRecord(recordPath(d.Path), fake); err != nil {
		t.Fatal(err)
	}
	if err := VerifyBaseDisk(d.Path); err != nil {
		t.Fatalf("a stamped disk was read again: %v", err)
	}
	if err := writeBaseDiskRecord(recordPath(d.Path), full); err != nil {
		t.Fatal(err)
	}

	// chmod: read again, found good, stamp recorded again.
	if err := os.Chmod(d.Path, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := VerifyBaseDisk(d.Path); err != nil {
		t.Fatal(err)
	}
	now, err := readBaseDiskRecord(recordPath(d.Path))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(d.Path); now.Stamp == nil || *now.Stamp == *full.Stamp || func() bool { s, _ := stampOf(fi); return s != *now.Stamp }() {
		t.Errorf("the stamp after a chmod is %+v (was %+v)", now.Stamp, full.Stamp)
	}

	// An edit with the size and mtime put back.
	fi, err := os.Stat(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a ctime the clock can tell apart
	editImage(t, d.Path, func(f *os.File) error {
		_, err := f.WriteAt([]byte{0xff}, rec.FSSize/2)
		return err
	})
	if err := os.Chtimes(d.Path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d.Path, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(d.Path); after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the edit did not keep size and mtime")
	}
	if err := VerifyBaseDisk(d.Path); !errors.Is(err, ErrBaseDiskDamaged) {
		t.Fatalf("VerifyBaseDisk of an edit with the size and mtime kept = %v, want ErrBaseDiskDamaged", err)
	}
}
