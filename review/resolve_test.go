package review

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// conflictFixture: the agent changed line 2 of a.txt and added b.txt; the
// user changed line 2 of a.txt too since the run. a.txt conflicts, b.txt
// does not.
func conflictFixture(t *testing.T) (*fixture, string) {
	t.Helper()
	fx := newFixture(t,
		tree{files: map[string]string{"a.txt": "one\ntwo\nthree\n", "keep.txt": "k\n"}},
		tree{files: map[string]string{"a.txt": "one\nagent two\nthree\n", "keep.txt": "k\n", "b.txt": "new\n"}}, nil)
	project := copyTree(t, fx.oldDir)
	writeFile(t, project, "a.txt", "one\nmy two\nthree\n")
	return fx, project
}

func applyOpts(t *testing.T, o ApplyOptions) ApplyOptions {
	o.JournalDir = journalDir(t)
	return o
}

func readProject(t *testing.T, project, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(project, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestAllOrNothingWritesNothingWhenAFileConflicts(t *testing.T) {
	fx, project := conflictFixture(t)
	before := snapshot(t, project)
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
		t.Errorf("the project changed (-before +after):\n%s", diff)
	}
	if !res.Held || len(res.Conflicts) != 1 || res.Conflicts[0].Path != "a.txt" || len(res.Applied)+len(res.Merged) != 0 || res.JournalDir != "" {
		t.Fatalf("result %+v", res)
	}
	if len(res.Withheld) != 1 || res.Withheld[0].Path != "b.txt" {
		t.Errorf("withheld %+v, want b.txt", res.Withheld)
	}
	c := res.Conflicts[0]
	if c.File != "a.txt" || !c.Project.Exists || c.Project.SHA256 != sha256Hex([]byte("one\nmy two\nthree\n")) || c.Approved.SHA256 != sha256Hex([]byte("one\nagent two\nthree\n")) {
		t.Errorf("conflict states: file %q project %+v approved %+v", c.File, c.Project, c.Approved)
	}
	if diff := cmp.Diff([]Choice{KeepMine, TakeTheirs, KeepBoth, UseContent}, c.Choices()); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
}

func TestAllOrNothingWritesEverythingWithoutConflicts(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Held || len(res.Applied) != len(fx.cs.Files) {
		t.Errorf("result %+v", res)
	}
	if diff := cmp.Diff(snapshot(t, fx.newDir), snapshot(t, project)); diff != "" {
		t.Errorf("after apply (-want +got):\n%s", diff)
	}
}

// resolveOnce finds the conflict, then applies again with choice for it,
// as the window does.
func resolveOnce(t *testing.T, fx *fixture, project string, r Resolution) (*Result, string) {
	t.Helper()
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true}))
	if err != nil || len(res.Conflicts) != 1 {
		t.Fatalf("first apply: %v %+v", err, res)
	}
	seen := res.Conflicts[0].Project
	r.Seen = &seen
	jd := journalDir(t)
	res, err = Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd, AllOrNothing: true,
		Resolutions: map[string]Resolution{"a.txt": r}})
	if err != nil {
		t.Fatal(err)
	}
	return res, jd
}

func TestResolveTheirsWritesTheApprovedChange(t *testing.T) {
	fx, project := conflictFixture(t)
	before := snapshot(t, project)
	res, jd := resolveOnce(t, fx, project, Resolution{Choice: TakeTheirs})
	if res.Held || len(res.Conflicts) != 0 || len(res.Resolved) != 1 || res.Resolved[0].Resolution != TakeTheirs {
		t.Fatalf("result %+v", res)
	}
	agent, _ := os.ReadFile(filepath.Join(fx.newDir, "a.txt"))
	if got := readProject(t, project, "a.txt"); got != string(agent) {
		t.Errorf("a.txt = %q, want the agent's %q byte for byte", got, agent)
	}
	if got := readProject(t, project, "b.txt"); got != "new\n" {
		t.Errorf("b.txt = %q: the rest was not applied with it", got)
	}
	// The resolution is in the apply's journal: Undo brings back the
	// user's version.
	if err := Undo(context.Background(), jd); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
		t.Errorf("after undo (-before +after):\n%s", diff)
	}
}

func TestResolveMineLeavesTheProjectFile(t *testing.T) {
	fx, project := conflictFixture(t)
	mine, _ := os.ReadFile(filepath.Join(project, "a.txt"))
	fi, _ := os.Stat(filepath.Join(project, "a.txt"))
	res, _ := resolveOnce(t, fx, project, Resolution{Choice: KeepMine})
	if len(res.Resolved) != 1 || res.Resolved[0].Resolution != KeepMine || res.Resolved[0].BeforeSHA256 != sha256Hex(mine) {
		t.Fatalf("result %+v", res)
	}
	if got := readProject(t, project, "a.txt"); got != string(mine) {
		t.Errorf("a.txt = %q, want %q byte for byte", got, mine)
	}
	if now, _ := os.Stat(filepath.Join(project, "a.txt")); !now.ModTime().Equal(fi.ModTime()) || now.Mode() != fi.Mode() {
		t.Error("a.txt was rewritten")
	}
	if got := readProject(t, project, "b.txt"); got != "new\n" {
		t.Errorf("b.txt = %q", got)
	}
}

func TestResolveBothKeepsBothStretches(t *testing.T) {
	fx, project := conflictFixture(t)
	resolveOnce(t, fx, project, Resolution{Choice: KeepBoth})
	if got, want := readProject(t, project, "a.txt"), "one\nmy two\nagent two\nthree\n"; got != want {
		t.Errorf("a.txt = %q, want %q", got, want)
	}
}

func TestBothSidesNeverJoinsLines(t *testing.T) {
	m := Merge3([]byte("x\ny"), []byte("x\nmine"), []byte("x\ntheirs"))
	if got, want := string(m.BothSides()), "x\nmine\ntheirs"; got != want {
		t.Errorf("both = %q, want %q", got, want)
	}
}

func TestResolveWithContent(t *testing.T) {
	fx, project := conflictFixture(t)
	res, _ := resolveOnce(t, fx, project, Resolution{Choice: UseContent, Content: []byte("one\ntool two\nthree\n")})
	if len(res.Resolved) != 1 || res.Resolved[0].Resolution != UseContent {
		t.Fatalf("result %+v", res)
	}
	if got := readProject(t, project, "a.txt"); got != "one\ntool two\nthree\n" {
		t.Errorf("a.txt = %q", got)
	}
	if fi, _ := os.Stat(filepath.Join(project, "a.txt")); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
}

// TestResolveRefusesWhenTheFileChangedAgain: a choice made on one version
// of the user's file is not used on another; the file is a conflict
// again, with what it holds now, and with AllOrNothing nothing is
// written.
func TestResolveRefusesWhenTheFileChangedAgain(t *testing.T) {
	fx, project := conflictFixture(t)
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true}))
	if err != nil {
		t.Fatal(err)
	}
	seen := res.Conflicts[0].Project
	writeFile(t, project, "a.txt", "one\nmy second two\nthree\n")
	before := snapshot(t, project)
	res, err = Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true,
		Resolutions: map[string]Resolution{"a.txt": {Choice: TakeTheirs, Seen: &seen}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Held || len(res.Conflicts) != 1 || !res.Conflicts[0].Again || string(res.Conflicts[0].Ours) != "one\nmy second two\nthree\n" || res.Conflicts[0].Merge == nil {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Conflicts[0].Reason, "changed in the project again") {
		t.Errorf("reason %q", res.Conflicts[0].Reason)
	}
	if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
		t.Errorf("the project changed (-before +after):\n%s", diff)
	}
}

// TestResolveRefusesASymlinkPutInPlace: a project file replaced by a
// symbolic link after the conflict was found is not written through, even
// by a resolution made without looking (Seen nil).
func TestResolveRefusesASymlinkPutInPlace(t *testing.T) {
	for _, seen := range []bool{true, false} {
		fx, project := conflictFixture(t)
		res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true}))
		if err != nil {
			t.Fatal(err)
		}
		outside := filepath.Join(t.TempDir(), "outside.txt")
		writeFile(t, filepath.Dir(outside), "outside.txt", "outside\n")
		if err := os.Remove(filepath.Join(project, "a.txt")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(project, "a.txt")); err != nil {
			t.Fatal(err)
		}
		r := Resolution{Choice: UseContent, Content: []byte("pwned\n")}
		if seen {
			r.Seen = &res.Conflicts[0].Project
		}
		res, err = Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true,
			Resolutions: map[string]Resolution{"a.txt": r}}))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Held || len(res.Conflicts) != 1 {
			t.Errorf("seen=%v: result %+v", seen, res)
		}
		if data, _ := os.ReadFile(outside); string(data) != "outside\n" {
			t.Errorf("seen=%v: written through the link: %q", seen, data)
		}
		if target, err := os.Readlink(filepath.Join(project, "a.txt")); err != nil || target != outside {
			t.Errorf("seen=%v: the link was replaced: %q %v", seen, target, err)
		}
	}
}

// TestResolveThatDoesNotFitIsAConflict: "both" of a binary file cannot
// be made; the file stays a conflict, saying why.
func TestResolveThatDoesNotFitIsAConflict(t *testing.T) {
	fx := newFixture(t,
		tree{files: map[string]string{"bin": "a\x00b"}},
		tree{files: map[string]string{"bin": "a\x00agent"}}, nil)
	project := copyTree(t, fx.oldDir)
	writeFile(t, project, "bin", "a\x00mine")
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true,
		Resolutions: map[string]Resolution{"bin": {Choice: KeepBoth}}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0].Reason, "choose mine or theirs") {
		t.Fatalf("result %+v", res)
	}
	if got := readProject(t, project, "bin"); got != "a\x00mine" {
		t.Errorf("bin = %q", got)
	}
	if diff := cmp.Diff([]Choice{KeepMine, TakeTheirs, UseContent}, res.Conflicts[0].Choices()); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
}

// TestResolveTheirsOfARemoval: theirs of a change that removes a file the
// user edited removes it; Undo brings it back.
func TestResolveTheirsOfARemoval(t *testing.T) {
	fx := newFixture(t,
		tree{files: map[string]string{"gone.txt": "old\n"}},
		tree{files: map[string]string{}}, nil)
	project := copyTree(t, fx.oldDir)
	writeFile(t, project, "gone.txt", "edited\n")
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{}))
	if err != nil || len(res.Conflicts) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	c := res.Conflicts[0]
	if _, exists, _ := c.Resolved(Resolution{Choice: TakeTheirs}); exists {
		t.Error("theirs of a removal exists")
	}
	jd := journalDir(t)
	if _, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd,
		Resolutions: map[string]Resolution{"gone.txt": {Choice: TakeTheirs, Seen: &c.Project}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(project, "gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone.txt is still there: %v", err)
	}
	if err := Undo(context.Background(), jd); err != nil {
		t.Fatal(err)
	}
	if got := readProject(t, project, "gone.txt"); got != "edited\n" {
		t.Errorf("after undo gone.txt = %q", got)
	}
}

func TestParseChoice(t *testing.T) {
	for _, s := range []string{"mine", "theirs", "both"} {
		if c, err := ParseChoice(s); err != nil || string(c) != s {
			t.Errorf("ParseChoice(%q) = %q, %v", s, c, err)
		}
	}
	for _, s := range []string{"", "content", "ours", "Theirs"} {
		if _, err := ParseChoice(s); err == nil {
			t.Errorf("ParseChoice(%q) took it", s)
		}
	}
}

// TestResolveRefusesAParentMadeALink: the folder of a file in conflict is
// replaced by a symbolic link to a folder outside the project before the
// resolution is applied: nothing is written there, nor anywhere with
// AllOrNothing.
func TestResolveRefusesAParentMadeALink(t *testing.T) {
	fx := newFixture(t,
		tree{files: map[string]string{"dir/a.txt": "one\ntwo\nthree\n"}},
		tree{files: map[string]string{"dir/a.txt": "one\nagent two\nthree\n", "b.txt": "new\n"}}, nil)
	project := copyTree(t, fx.oldDir)
	writeFile(t, project, "dir/a.txt", "one\nmy two\nthree\n")
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true}))
	if err != nil || len(res.Conflicts) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	seen := res.Conflicts[0].Project
	outside := t.TempDir()
	writeFile(t, outside, "a.txt", "one\nmy two\nthree\n")
	if err := os.RemoveAll(filepath.Join(project, "dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(project, "dir")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, project)
	res, err = Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), applyOpts(t, ApplyOptions{AllOrNothing: true,
		Resolutions: map[string]Resolution{"dir/a.txt": {Choice: TakeTheirs, Seen: &seen}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Held || len(res.Conflicts) != 1 || !res.Conflicts[0].Again || !strings.Contains(res.Conflicts[0].Reason, "symbolic link") {
		t.Errorf("result %+v", res)
	}
	if got := readProject(t, outside, "a.txt"); got != "one\nmy two\nthree\n" {
		t.Errorf("written outside the project: %q", got)
	}
	if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
		t.Errorf("the project changed (-before +after):\n%s", diff)
	}
}
