package review

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/google/go-cmp/cmp"
)

// mapTree is a linkLookup over path -> "dir", "file" or "->target".
type mapTree map[string]string

func (m mapTree) lookup(p string) (linkNode, string, error) {
	v, ok := m[p]
	switch {
	case !ok, v == "file":
		return nodeOther, "", nil
	case v == "dir":
		return nodeDir, "", nil
	}
	return nodeLink, strings.TrimPrefix(v, "->"), nil
}

func TestResolveLink(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree mapTree
		link string
		want string // "" for inside, else the escape as words
	}{
		{"plain", mapTree{"l": "->a", "a": "file"}, "l", ""},
		{"absolute", mapTree{"l": "->/etc"}, "l", "leads to an absolute path"},
		{"climbs", mapTree{"sub": "dir", "sub/l": "->../.."}, "sub/l", "climbs above the project's root"},
		{"up one stays", mapTree{"sub": "dir", "sub/l": "->../x"}, "sub/l", ""},
		// The attack of issue 14: every target is inside as text.
		{"chain", mapTree{"d1": "->.", "up": "->d1/d1/../.."}, "up", `climbs above the project's root through d1 -> "."`},
		{"user's link", mapTree{"d1": "->.", "up": "->d1/.."}, "up", `climbs above the project's root through d1 -> "."`},
		{"deep chain", mapTree{"a": "dir", "a/b": "->..", "l": "->a/b/a/b/.."}, "l", `climbs above the project's root through a/b -> ".."`},
		{"through an absolute link", mapTree{"ext": "->/opt", "l": "->ext/lib"}, "l", `leads to an absolute path through ext -> "/opt"`},
		{"loop", mapTree{"a": "->b", "b": "->a", "l": "->a"}, "l", `goes through more than 40 links (a loop?) through a -> "b", then b -> "a"`},
		{"self", mapTree{"l": "->l"}, "l", "goes through more than 40 links (a loop?)"},
		// A missing directory may appear later: judged as if it were one.
		{"missing then up", mapTree{"l": "->missing/../x"}, "l", ""},
		{"missing climbs", mapTree{"l": "->missing/../../x"}, "l", "climbs above the project's root"},
		{"file taken as a directory", mapTree{"f": "file", "l": "->f/../.."}, "l", "climbs above the project's root"},
		{"dot dot after a link to a subdirectory", mapTree{"a": "dir", "a/b": "dir", "s": "->a/b", "l": "->s/../.."}, "l", ""},
		{"dot dot after a link to a subdirectory, once more", mapTree{"a": "dir", "a/b": "dir", "s": "->a/b", "l": "->s/../../.."}, "l", `climbs above the project's root through s -> "a/b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			esc, err := resolveLink(tc.link, tc.tree.lookup)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if esc != nil {
				got = esc.String()
			}
			if got != tc.want {
				t.Errorf("resolveLink(%s) = %q, want %q", tc.link, got, tc.want)
			}
		})
	}
}

// linkChange is the addition of a symbolic link, for hand-made changesets.
func linkChange(p, target string) manifest.Change {
	return manifest.Change{Kind: manifest.Added, Path: p, New: &manifest.Entry{Path: p, Type: manifest.Symlink, Target: target}}
}

// projectWithSibling makes a project next to a directory it must never
// reach, and returns both.
func projectWithSibling(t *testing.T) (project, outside string) {
	t.Helper()
	parent := t.TempDir()
	project, outside = filepath.Join(parent, "project"), filepath.Join(parent, "outside")
	for _, d := range []string{project, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, project, "keep.txt", "k\n")
	return project, outside
}

// TestApplyRefusesLinkChain is the attack: each link's target looks
// inside the project as text, but up -> d1/d1/../.. through d1 -> . leads
// to the project's parent.
func TestApplyRefusesLinkChain(t *testing.T) {
	project, _ := projectWithSibling(t)
	before := snapshot(t, project)
	cs, err := New(context.Background(), []manifest.Change{linkChange("d1", "."), linkChange("up", "d1/d1/../..")}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var d Decisions
	d.SetFile("up", Approve)
	d.SetFile("d1", Approve)
	res, err := Apply(context.Background(), project, cs, d, ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Path != "up" {
		t.Fatalf("skipped %+v, want up", res.Skipped)
	}
	want := `symbolic link up points outside the project: its target "d1/d1/../.." climbs above the project's root through d1 -> "."; not created (if you meant it, make the link yourself after the apply)`
	if got := res.Skipped[0].Reason; got != want {
		t.Errorf("reason:\n%s\nwant\n%s", got, want)
	}
	if _, err := os.Lstat(filepath.Join(project, "up")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("up was created: %v", err)
	}
	// d1 -> . alone stays inside and is created; nothing else changed.
	if diff := cmp.Diff(sortedLines(before+"d1 link -> .\n"), sortedLines(snapshot(t, project))); diff != "" {
		t.Errorf("project (-want +got):\n%s", diff)
	}

	// Only the chain approved: nothing at all changes.
	project, _ = projectWithSibling(t)
	before = snapshot(t, project)
	d = Decisions{}
	d.SetFile("up", Approve)
	if err := os.Symlink(".", filepath.Join(project, "d1")); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, project)
	res, err = Apply(context.Background(), project, cs, d, ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 1 || len(res.Applied) != 0 {
		t.Errorf("result %+v", res)
	}
	if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
		t.Errorf("project changed (-want +got):\n%s", diff)
	}
}

// TestApplyRefusesChainThroughUsersLink: the user's own link d1 -> .
// makes a new link up -> d1/.. lead to the project's parent.
func TestApplyRefusesChainThroughUsersLink(t *testing.T) {
	project, _ := projectWithSibling(t)
	if err := os.Symlink(".", filepath.Join(project, "d1")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, project)
	cs, err := New(context.Background(), []manifest.Change{linkChange("up", "d1/.."), linkChange("ok", "d1/keep.txt")}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Apply(context.Background(), project, cs, ApproveAll(cs), ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Path != "up" || !strings.Contains(res.Skipped[0].Reason, `through d1 -> "."`) {
		t.Errorf("skipped %+v", res.Skipped)
	}
	if diff := cmp.Diff(sortedLines(before+"ok link -> d1/keep.txt\n"), sortedLines(snapshot(t, project))); diff != "" {
		t.Errorf("project (-want +got):\n%s", diff)
	}
}

// TestApplyRefusesChainOfRefusedLinks: refusing one link changes what the
// others lead to, so the check runs again on what is left. The guest
// renames the user's link c -> / to c2 (refused: absolute) and adds
// d -> c/x, harmless while c is gone, but c stays where it was.
func TestApplyRefusesChainOfRefusedLinks(t *testing.T) {
	project, _ := projectWithSibling(t)
	if err := os.Symlink("/", filepath.Join(project, "c")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, project)
	old := &manifest.Entry{Path: "c", Type: manifest.Symlink, Target: "/"}
	cs, err := New(context.Background(), []manifest.Change{
		{Kind: manifest.Renamed, Path: "c2", OldPath: "c", Old: old, New: &manifest.Entry{Path: "c2", Type: manifest.Symlink, Target: "/"}},
		linkChange("d", "c/x"),
	}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Apply(context.Background(), project, cs, ApproveAll(cs), ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for _, s := range res.Skipped {
		skipped = append(skipped, s.Path+": "+s.Reason)
	}
	sort.Strings(skipped)
	if len(skipped) != 2 || !strings.Contains(skipped[0], "c2 points outside the project: its target \"/\" leads to an absolute path") ||
		!strings.Contains(skipped[1], `d points outside the project: its target "c/x" leads to an absolute path through c -> "/"`) {
		t.Errorf("skipped:\n%s", strings.Join(skipped, "\n"))
	}
	if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
		t.Errorf("project changed (-want +got):\n%s", diff)
	}
}

// TestApplyRollsBackLinkThatEscapesOnceWritten: the plan saw a directory
// d1; during the apply it becomes the link d1 -> . and up -> d1/d1/../..
// now leads out. The check through os.Root after writing catches it and
// the whole apply is rolled back.
func TestApplyRollsBackLinkThatEscapesOnceWritten(t *testing.T) {
	project, _ := projectWithSibling(t)
	if err := os.Mkdir(filepath.Join(project, "d1"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := []byte("new\n")
	s := store{sha256Hex(data): data}
	cs, err := New(context.Background(), []manifest.Change{linkChange("up", "d1/d1/../.."),
		{Kind: manifest.Added, Path: "new.txt", New: &manifest.Entry{Path: "new.txt", Type: manifest.File, Mode: 0o644, SHA256: sha256Hex(data), Size: 4}}}, s.source, Options{})
	if err != nil {
		t.Fatal(err)
	}
	jd := journalDir(t)
	swapped := false
	opts := ApplyOptions{JournalDir: jd, crash: func(done int) bool {
		if !swapped {
			swapped = true
			if err := os.Remove(filepath.Join(project, "d1")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(".", filepath.Join(project, "d1")); err != nil {
				t.Fatal(err)
			}
		}
		return false
	}}
	_, err = Apply(context.Background(), project, cs, ApproveAll(cs), opts)
	after := snapshot(t, project)
	if err == nil || !strings.Contains(err.Error(), "symbolic link up") || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("err = %v", err)
	}
	for _, p := range []string{"up", "new.txt"} {
		if _, err := os.Lstat(filepath.Join(project, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left in the project: %v", p, err)
		}
	}
	if want := "d1 link -> .\n"; !strings.Contains(after, want) {
		t.Errorf("project:\n%s", after)
	}
	if j, err := ReadJournal(jd); err != nil || j.State != Undone {
		t.Errorf("journal: %v %+v", err, j)
	}
}

// FuzzLinkChain builds small trees of directories, files and links, and
// checks that whenever resolveLink says a link stays inside, the kernel
// agrees on the same tree on disk: filepath.EvalSymlinks either fails
// (dangling, a loop, through a file) or lands inside the root.
func FuzzLinkChain(f *testing.F) {
	f.Add([]byte{0, 0, 3, 2}, "d1/d1/../..")
	f.Add([]byte{1, 2, 0, 1}, "a/..")
	f.Add([]byte{3, 5, 1, 2, 0, 3}, "../x")
	f.Add([]byte{7, 8, 6, 1, 0, 2}, "b/a/../../..")
	f.Add([]byte{}, "x/../..")
	f.Fuzz(func(t *testing.T, shape []byte, target string) {
		paths := []string{"a", "b", "d1", "a/a", "a/b", "b/a", "d1/d1", "a/a/a"}
		targets := []string{".", "..", "a", "b/..", "../..", "d1/..", "a/a/..", "d1/d1/../..", target}
		type entry struct{ kind, target string }
		want := map[string]entry{}
		for i := 0; i+1 < len(shape) && i < 32; i += 2 {
			p := paths[int(shape[i])%len(paths)]
			e := entry{kind: []string{"dir", "file", "link"}[int(shape[i+1])%3]}
			if e.kind == "link" {
				e.target = targets[int(shape[i+1]/3)%len(targets)]
			}
			want[p] = e
		}
		link := "l"
		if len(shape) > 0 && shape[0]&0x80 != 0 {
			link = "a/l" // a link one level down, when a is a directory
		}
		want[link] = entry{kind: "link", target: target}

		root := t.TempDir()
		made := mapTree{}
		keys := make([]string, 0, len(want))
		for p := range want {
			keys = append(keys, p)
		}
		sort.Slice(keys, func(i, j int) bool {
			if di, dj := strings.Count(keys[i], "/"), strings.Count(keys[j], "/"); di != dj {
				return di < dj
			}
			return keys[i] < keys[j]
		})
		for _, p := range keys {
			if dir := path.Dir(p); dir != "." && made[dir] != "dir" {
				continue // its parent is not a directory
			}
			e, fp := want[p], filepath.Join(root, filepath.FromSlash(p))
			var err error
			switch e.kind {
			case "dir":
				err = os.Mkdir(fp, 0o755)
			case "file":
				err = os.WriteFile(fp, nil, 0o644)
			default:
				err = os.Symlink(e.target, fp)
			}
			if err != nil {
				continue // a target the filesystem refuses (NUL, too long)
			}
			made[p] = e.kind
			if e.kind == "link" {
				made[p] = "->" + e.target
			}
		}
		if _, ok := made[link]; !ok {
			return
		}
		esc, err := resolveLink(link, made.lookup)
		if err != nil {
			t.Fatal(err)
		}
		if esc != nil {
			return // refused: whatever the kernel says, nothing is created
		}
		realRoot, err := filepath.EvalSymlinks(root)
		if err != nil {
			t.Fatal(err)
		}
		got, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(link)))
		if err != nil {
			return // does not resolve: leads nowhere
		}
		if rel, err := filepath.Rel(realRoot, got); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			t.Fatalf("resolveLink says %s -> %q stays inside, the kernel resolves it to %s (root %s); tree %v", link, target, got, realRoot, made)
		}
	})
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return lines
}

// TestApplyKeepsLongChainInside: os.Root gives up after 8 links, the
// kernel after 40; a chain of 12 links that stays inside is created and
// not rolled back.
func TestApplyKeepsLongChainInside(t *testing.T) {
	project, _ := projectWithSibling(t)
	var ch []manifest.Change
	for i := range 12 {
		target := "keep.txt"
		if i > 0 {
			target = "l" + string(rune('a'+i-1))
		}
		ch = append(ch, linkChange("l"+string(rune('a'+i)), target))
	}
	cs, err := New(context.Background(), ch, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Apply(context.Background(), project, cs, ApproveAll(cs), ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 12 || len(res.Skipped) != 0 {
		t.Errorf("result %+v", res)
	}
}

// TestApplyRefusesLinkInNewFolder: a link created in a folder the apply
// makes (sub/up2 -> ../.., sub not in the project yet) is followed from
// that folder and refused before anything is written, not caught only
// once written.
func TestApplyRefusesLinkInNewFolder(t *testing.T) {
	project, _ := projectWithSibling(t)
	before := snapshot(t, project)
	cs, err := New(context.Background(), []manifest.Change{linkChange("sub/up2", "../.."), linkChange("sub/deep/in", "../../a.txt")}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var d Decisions
	d.SetFile("sub/up2", Approve)
	res, err := Apply(context.Background(), project, cs, d, ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatalf("apply: %v (the link should be refused in planning, not rolled back)", err)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Path != "sub/up2" || !strings.Contains(res.Skipped[0].Reason, "points outside the project") {
		t.Fatalf("skipped %+v, want sub/up2 outside the project", res.Skipped)
	}
	if diff := cmp.Diff(sortedLines(before), sortedLines(snapshot(t, project))); diff != "" {
		t.Errorf("project changed (-want +got):\n%s", diff)
	}
	// A link in a new folder that stays inside is created.
	d = Decisions{}
	d.SetFile("sub/deep/in", Approve)
	if res, err := Apply(context.Background(), project, cs, d, ApplyOptions{JournalDir: journalDir(t)}); err != nil || len(res.Skipped) != 0 {
		t.Fatalf("apply sub/deep/in: %+v, %v", res, err)
	}
	if got, err := os.Readlink(filepath.Join(project, "sub/deep/in")); err != nil || got != "../../a.txt" {
		t.Errorf("sub/deep/in: %q, %v", got, err)
	}
}
