package review

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/google/go-cmp/cmp"
)

func numbered(n int, edit map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if s, ok := edit[i]; ok {
			b.WriteString(s)
			continue
		}
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// richOld and richNew exercise every kind of change.
var (
	richOld = tree{files: map[string]string{
		"a.txt":       numbered(30, nil),
		"noeol.txt":   "x\ny",
		"addeol.txt":  "a\nb",
		"dropeol.txt": "a\nb\n",
		"crlf.txt":    "one\r\ntwo\r\nthree\r\n",
		"removed.txt": "gone\nsoon\n",
		"mode.sh":     "#!/bin/sh\necho hi\n",
		"bin.dat":     "\x00\x01\x02binary",
		"link":        "->a.txt",
		"dir/old.txt": "renamed content\n",
		"typechg":     "was a file\n",
		"same.txt":    "unchanged\n",
		"gone/":       "",
		"oldbin.dat":  "\x00old binary\xff",
		"gone/f.txt":  "bye\n",
	}, modes: map[string]fs.FileMode{"gone/": 0o700}}
	richNew = tree{files: map[string]string{
		"a.txt":            numbered(30, map[int]string{3: "line three\n", 4: "", 25: "line 25\nline 25b\n"}),
		"noeol.txt":        "x\nz",
		"addeol.txt":       "a\nb\n",
		"dropeol.txt":      "a\nb",
		"crlf.txt":         "one\r\n2\r\nthree\r\n",
		"mode.sh":          "#!/bin/sh\necho hi\n",
		"bin.dat":          "\x00\x01\x03binary",
		"link":             "->noeol.txt",
		"dir/new.txt":      "renamed content\n",
		"typechg":          "->same.txt",
		"same.txt":         "unchanged\n",
		"sub/deep/new.txt": "brand\nnew\n",
		"empty.txt":        "",
		"newbin.dat":       strings.Repeat("\x89PNG\x00\x01", 40),
	}, modes: map[string]fs.FileMode{"mode.sh": 0o755}}
)

func TestChangesetStatuses(t *testing.T) {
	fx := newFixture(t, richOld, richNew, map[string]string{"dir/old.txt": "dir/new.txt"})
	got := map[string]string{}
	for _, f := range fx.cs.Files {
		got[f.Path] = fmt.Sprintf("%s +%d -%d binary=%v hunks=%d", f.Status, f.Added, f.Removed, f.Binary, len(f.Hunks))
	}
	want := map[string]string{
		"a.txt":            "modified +2 -2 binary=false hunks=2",
		"noeol.txt":        "modified +1 -1 binary=false hunks=1",
		"addeol.txt":       "modified +1 -1 binary=false hunks=1",
		"dropeol.txt":      "modified +1 -1 binary=false hunks=1",
		"crlf.txt":         "modified +1 -1 binary=false hunks=1",
		"removed.txt":      "deleted +0 -2 binary=false hunks=1",
		"mode.sh":          "mode-changed +0 -0 binary=false hunks=0",
		"bin.dat":          "modified +0 -0 binary=true hunks=0",
		"link":             "modified +1 -1 binary=false hunks=1",
		"dir/new.txt":      "renamed +0 -0 binary=false hunks=0",
		"typechg":          "type-changed +0 -0 binary=false hunks=0",
		"sub":              "added +0 -0 binary=false hunks=0",
		"sub/deep":         "added +0 -0 binary=false hunks=0",
		"sub/deep/new.txt": "added +2 -0 binary=false hunks=1",
		"empty.txt":        "added +0 -0 binary=false hunks=0",
		"gone":             "deleted +0 -0 binary=false hunks=0",
		"oldbin.dat":       "deleted +0 -0 binary=true hunks=0",
		"newbin.dat":       "added +0 -0 binary=true hunks=0",
		"gone/f.txt":       "deleted +0 -1 binary=false hunks=1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changeset (-want +got):\n%s", diff)
	}
	f := fx.cs.File("dir/new.txt")
	if f.OldPath != "dir/old.txt" {
		t.Errorf("rename source = %q", f.OldPath)
	}
	if m := fx.cs.File("mode.sh"); m.Old.Mode != 0o644 || m.New.Mode != 0o755 {
		t.Errorf("modes = %o -> %o", m.Old.Mode, m.New.Mode)
	}
	if !fx.cs.File("link").IsSymlink() {
		t.Error("link is not a symlink")
	}
}

func TestHunkLines(t *testing.T) {
	fx := newFixture(t, richOld, richNew, nil)
	h := fx.cs.File("a.txt").Hunks
	if h[0].OldStart != 1 || h[0].OldLines != 7 || h[0].NewStart != 1 || h[0].NewLines != 6 {
		t.Errorf("hunk 0 = -%d,%d +%d,%d", h[0].OldStart, h[0].OldLines, h[0].NewStart, h[0].NewLines)
	}
	if h[1].OldStart != 23 || h[1].OldLines != 6 || h[1].NewStart != 22 || h[1].NewLines != 7 {
		t.Errorf("hunk 1 = -%d,%d +%d,%d", h[1].OldStart, h[1].OldLines, h[1].NewStart, h[1].NewLines)
	}
	ne := fx.cs.File("noeol.txt").Hunks[0]
	want := []Line{{Context, "x", false}, {Delete, "y", true}, {Insert, "z", true}}
	if diff := cmp.Diff(want, ne.Lines); diff != "" {
		t.Errorf("noeol hunk (-want +got):\n%s", diff)
	}
}

func TestNewRejectsHostileInput(t *testing.T) {
	good := manifest.Entry{Path: "a", Type: manifest.File, Mode: 0o644, SHA256: sha256Hex([]byte("x"))}
	src := store{good.SHA256: []byte("x")}
	lying := store{good.SHA256: []byte("not x")}
	cases := []struct {
		name string
		c    manifest.Change
		src  store
	}{
		{"dotdot", manifest.Change{Kind: manifest.Added, Path: "../a", New: &good}, src},
		{"absolute", manifest.Change{Kind: manifest.Added, Path: "/etc/passwd", New: &good}, src},
		{"git dir", manifest.Change{Kind: manifest.Added, Path: ".git/hooks/pre-commit", New: &good}, src},
		{"nul", manifest.Change{Kind: manifest.Added, Path: "a\x00b", New: &good}, src},
		{"rename source", manifest.Change{Kind: manifest.Renamed, Path: "a", OldPath: "../../x", Old: &good, New: &good}, src},
		{"device", manifest.Change{Kind: manifest.Added, Path: "a", New: &manifest.Entry{Path: "a", Type: "device"}}, src},
		{"lying store", manifest.Change{Kind: manifest.Added, Path: "a", New: &good}, lying},
		{"missing old", manifest.Change{Kind: manifest.Modified, Path: "a", New: &good}, src},
		{"unknown kind", manifest.Change{Kind: "exploded", Path: "a", New: &good}, src},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(context.Background(), []manifest.Change{tc.c}, tc.src.source, Options{}); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestTooLargeIsBinary(t *testing.T) {
	big := strings.Repeat("text line\n", 100)
	e := manifest.Entry{Path: "big.txt", Type: manifest.File, Mode: 0o644, SHA256: sha256Hex([]byte(big))}
	s := store{e.SHA256: []byte(big)}
	cs, err := New(context.Background(), []manifest.Change{{Kind: manifest.Added, Path: "big.txt", New: &e}}, s.source, Options{MaxTextSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if f := cs.Files[0]; !f.Binary || !f.TooLarge || len(f.Hunks) != 0 {
		t.Errorf("binary=%v tooLarge=%v hunks=%d", f.Binary, f.TooLarge, len(f.Hunks))
	}
}

func TestLooksBinary(t *testing.T) {
	for in, want := range map[string]bool{"": false, "plain\n": false, "caf\xc3\xa9": false, "a\x00b": true, "latin1 \xe9": true} {
		if got := looksBinary([]byte(in)); got != want {
			t.Errorf("looksBinary(%q) = %v", in, got)
		}
	}
}
