package review

import (
	"bytes"
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff/lcs"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// FuzzHunkSelection checks that any subset of hunks gives a result
// consistent with the diff: all hunks give the new content, none the old,
// and every subset has the length the selected hunks imply.
func FuzzHunkSelection(f *testing.F) {
	f.Add([]byte(numbered(30, nil)), []byte(numbered(30, map[int]string{3: "x\n", 20: "", 29: "y\nz\n"})), uint64(0b101), 3)
	f.Add([]byte("a\nb"), []byte("a\nb\n"), uint64(1), 3)
	f.Add([]byte(""), []byte("new\n"), uint64(1), 0)
	f.Add([]byte("x\r\ny\r\n"), []byte(""), uint64(0), 1)
	f.Fuzz(func(t *testing.T, old, new []byte, mask uint64, context int) {
		if len(old) > 1<<14 || len(new) > 1<<14 {
			return
		}
		context = ((context % 5) + 5) % 5
		oldLines, newLines := splitLines(old), splitLines(new)
		hunks := buildHunks(oldLines, newLines, context)
		if got := applyHunks(old, hunks, func(int) bool { return true }); !bytes.Equal(got, new) {
			t.Fatalf("all hunks: got %q want %q", got, new)
		}
		if got := applyHunks(old, hunks, func(int) bool { return false }); !bytes.Equal(got, old) {
			t.Fatalf("no hunk: got %q want %q", got, old)
		}
		if (len(hunks) == 0) != bytes.Equal(old, new) {
			t.Fatalf("%d hunks for equal=%v", len(hunks), bytes.Equal(old, new))
		}
		// The anchored path, forced: its edits must still rebuild new.
		checkEdits(t, oldLines, newLines, anchoredDiff(oldLines, newLines, 0, 0))
		prevEnd := 0
		wantLines := len(oldLines)
		for i, h := range hunks {
			checkHunk(t, h, oldLines, newLines, prevEnd)
			prevEnd = h.oldOffset() + h.OldLines
			if mask&(1<<(i%64)) != 0 {
				wantLines += h.NewLines - h.OldLines
			}
		}
		got := applyHunks(old, hunks, func(i int) bool { return mask&(1<<(i%64)) != 0 })
		if n := len(splitLines(got)); n != wantLines {
			t.Fatalf("subset %b: %d lines, want %d", mask, n, wantLines)
		}
	})
}

// checkHunk verifies a hunk against both files: its old side (context and
// "-" lines) is old at OldStart, its new side new at NewStart.
func checkHunk(t *testing.T, h Hunk, oldLines, newLines []string, prevEnd int) {
	t.Helper()
	var oldSide, newSide []string
	added, removed := 0, 0
	for i, l := range h.Lines {
		if strings.Contains(l.Text, "\n") {
			t.Fatalf("line text holds a newline: %q", l.Text)
		}
		if l.NoEOL && i != len(h.Lines)-1 && h.Lines[i+1].Kind == l.Kind {
			t.Fatalf("NoEOL on a line that is not last: %+v", h.Lines)
		}
		if l.Kind != Insert {
			oldSide = append(oldSide, l.bytes())
		}
		if l.Kind != Delete {
			newSide = append(newSide, l.bytes())
		}
		switch l.Kind {
		case Insert:
			added++
		case Delete:
			removed++
		}
	}
	if added != h.Added || removed != h.Removed || len(oldSide) != h.OldLines || len(newSide) != h.NewLines {
		t.Fatalf("hunk counts wrong: %+v", h)
	}
	off := h.oldOffset()
	if off < prevEnd || off+h.OldLines > len(oldLines) || !equalLines(oldSide, oldLines[off:off+h.OldLines]) {
		t.Fatalf("hunk old side does not match old at %d: %+v", off, h)
	}
	noff := h.NewStart - 1
	if h.NewLines == 0 {
		noff = h.NewStart
	}
	if noff < 0 || noff+h.NewLines > len(newLines) || !equalLines(newSide, newLines[noff:noff+h.NewLines]) {
		t.Fatalf("hunk new side does not match new at %d: %+v", noff, h)
	}
}

// FuzzMerge3 checks the three-way merge invariants.
func FuzzMerge3(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), []byte("a\nB\nc\n"), []byte("a\nb\nC\n"))
	f.Add([]byte("a\nb\nc"), []byte("a\nb\nc\n"), []byte("x\na\nb\nc"))
	f.Add([]byte(""), []byte("x\n"), []byte("y\n"))
	f.Add([]byte("1\n2\n3\n4\n5\n6\n"), []byte("1\n3\n4\n5\n6\n"), []byte("1\n2\n3\n4\n6\nseven\n"))
	f.Fuzz(func(t *testing.T, base, x, y []byte) {
		if len(base)+len(x)+len(y) > 1<<14 {
			return
		}
		for _, c := range []struct {
			name           string
			b, ours, their []byte
			want           []byte
		}{
			{"merge(base, base, x)", base, base, x, x},
			{"merge(base, x, base)", base, x, base, x},
			{"merge(base, x, x)", base, x, x, x},
		} {
			m := Merge3(c.b, c.ours, c.their)
			got, ok := m.Content()
			if !ok || !bytes.Equal(got, c.want) {
				t.Fatalf("%s: clean=%v got %q want %q", c.name, ok, got, c.want)
			}
		}
		m := Merge3(base, x, y)
		if got, ok := m.Content(); ok {
			if !bytes.Equal(m.WithMarkers(MarkerLabels{}), got) {
				t.Fatal("markers of a clean merge differ from its content")
			}
			// Merging is symmetric: swapping the sides gives the same text.
			swapped, ok := Merge3(base, y, x).Content()
			if !ok || !bytes.Equal(swapped, got) {
				t.Fatalf("merge(base, y, x) = %q (clean %v), want %q", swapped, ok, got)
			}
		} else {
			for _, c := range m.Chunks {
				if c.Conflict && bytes.Equal(c.Ours, c.Theirs) {
					t.Fatalf("conflict with equal sides: %+v", c)
				}
			}
		}
	})
}

// FuzzValidatePath checks that every accepted path stays inside a root
// however it is joined.
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "/etc/passwd", "a/../../b", "a//b", "./a", ".git/config", "a/.GIT/x", "a\x00b", "a\\..\\b", "é", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p) != nil {
			return
		}
		if path.Clean(p) != p || path.IsAbs(p) || strings.ContainsAny(p, "\x00\\") {
			t.Fatalf("accepted %q", p)
		}
		root := "/project/root"
		joined := filepath.Join(root, filepath.FromSlash(p))
		if rel, err := filepath.Rel(root, joined); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("accepted %q which leaves the root (%s)", p, joined)
		}
		for _, elem := range strings.Split(p, "/") {
			if elem == "" || elem == "." || elem == ".." || strings.EqualFold(elem, ".git") {
				t.Fatalf("accepted %q with element %q", p, elem)
			}
		}
	})
}

// FuzzApplyPaths applies a changeset made of a hostile symlink and a file
// under it, at fuzzed paths and target, and checks nothing is ever written
// outside the project.
func FuzzApplyPaths(f *testing.F) {
	f.Add("sub", "/tmp", "sub/x")
	f.Add("sub", "..", "sub/x")
	f.Add("a", "../../outside", "a/b/c")
	f.Add("l", ".", "l/../../escape")
	f.Add("ok", "dir", "dir/file")
	f.Fuzz(func(t *testing.T, linkPath, target, filePath string) {
		data := []byte("payload\n")
		sum := sha256Hex(data)
		s := store{sum: data}
		changes := []manifest.Change{
			{Kind: manifest.Added, Path: linkPath, New: &manifest.Entry{Path: linkPath, Type: manifest.Symlink, Target: target}},
			{Kind: manifest.Added, Path: filePath, New: &manifest.Entry{Path: filePath, Type: manifest.File, Mode: 0o6777, SHA256: sum, Size: int64(len(data))}},
		}
		cs, err := New(context.Background(), changes, s.source, Options{})
		if err != nil {
			return
		}
		parent := t.TempDir()
		project := filepath.Join(parent, "project")
		outside := filepath.Join(parent, "outside")
		for _, d := range []string{project, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, allow := range []bool{false, true} {
			jd := filepath.Join(t.TempDir(), "journal")
			_, _ = Apply(context.Background(), project, cs, ApproveAll(cs), ApplyOptions{JournalDir: jd, AllowEscapingSymlinks: allow})
			ents, err := os.ReadDir(parent)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 2 {
				t.Fatalf("something appeared next to the project: %v", ents)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("wrote outside the project: %v", ents)
			}
			_ = filepath.WalkDir(project, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if fi, _ := os.Lstat(p); fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
						t.Fatalf("%s has special bits %v", p, fi.Mode())
					}
				}
				return nil
			})
		}
	})
}

// checkEdits verifies that ds are ordered, disjoint, and turn a into b.
func checkEdits(t *testing.T, a, b []string, ds []lcs.Diff) {
	t.Helper()
	var out []string
	ai, bi := 0, 0
	for _, d := range ds {
		if d.Start < ai || d.End < d.Start || d.ReplStart < bi || d.ReplEnd < d.ReplStart || d.End > len(a) || d.ReplEnd > len(b) {
			t.Fatalf("bad edit %+v after (%d, %d)", d, ai, bi)
		}
		if d.Start-ai != d.ReplStart-bi || !equalLines(a[ai:d.Start], b[bi:d.ReplStart]) {
			t.Fatalf("unchanged stretch before %+v differs", d)
		}
		out = append(out, a[ai:d.Start]...)
		out = append(out, b[d.ReplStart:d.ReplEnd]...)
		ai, bi = d.End, d.ReplEnd
	}
	out = append(out, a[ai:]...)
	if !equalLines(out, b) {
		t.Fatalf("edits do not rebuild the new side")
	}
}
