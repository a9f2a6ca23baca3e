package review

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/google/go-cmp/cmp"
)

// manifestOf is a scan as the Manifest the walk would build.
func manifestOf(scan map[string]manifest.Entry) *manifest.Manifest {
	m := &manifest.Manifest{}
	for _, e := range scan {
		m.Entries = append(m.Entries, e)
	}
	m.Sort()
	return m
}

// diffFixture is newFixture with the changes manifest.Diff reports, as a
// sandbox's review sees them (implied directories left out, renames by
// content).
func diffFixture(t *testing.T, oldT, newT tree) *fixture {
	t.Helper()
	base := t.TempDir()
	fx := &fixture{oldDir: filepath.Join(base, "old"), newDir: filepath.Join(base, "new"), store: store{}}
	for _, d := range []string{fx.oldDir, fx.newDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	oldT.write(t, fx.oldDir)
	newT.write(t, fx.newDir)
	ch := manifest.Diff(manifestOf(scan(t, fx.oldDir, fx.store)), manifestOf(scan(t, fx.newDir, fx.store)))
	cs, err := New(context.Background(), ch, fx.store.source, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fx.cs = cs
	return fx
}

// The two type changes of issue 19: a file replaced by a directory and a
// directory replaced by a file.
var (
	typeOld = tree{files: map[string]string{
		"lib":     "old lib\nfile\n",
		"d/":      "",
		"d/x.txt": "x\n",
		"keep":    "k\n",
	}}
	typeNew = tree{files: map[string]string{
		"lib/":        "",
		"lib/mod.txt": "module\n",
		"d":           "now a file\n",
		"keep":        "k\n",
	}}
)

type fileSummary struct {
	Path, Status string
	Old, New     manifest.Type
}

func summarize(cs *Changeset) []fileSummary {
	var out []fileSummary
	for _, f := range cs.Files {
		s := fileSummary{Path: f.Path, Status: string(f.Status)}
		if f.Old != nil {
			s.Old = f.Old.Type
		}
		if f.New != nil {
			s.New = f.New.Type
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func TestTypeChangeChangeset(t *testing.T) {
	fx := diffFixture(t, typeOld, typeNew)
	want := []fileSummary{
		{"d", "type-changed", manifest.Dir, manifest.File},
		{"d/x.txt", "deleted", manifest.File, ""},
		{"lib", "type-changed", manifest.File, manifest.Dir},
		{"lib/mod.txt", "added", "", manifest.File},
	}
	if diff := cmp.Diff(want, summarize(fx.cs)); diff != "" {
		t.Errorf("changeset (-want +got):\n%s", diff)
	}
}

// typeCases are type changes between files, links and directories, each
// with the baseline and the guest's tree.
var typeCases = []struct {
	name     string
	old, new tree
}{
	{"file to dir and dir to file", typeOld, typeNew},
	{"link to dir and dir to link", tree{files: map[string]string{
		"keep": "k\n", "ln": "->keep", "sd/": "", "sd/a.txt": "a\n",
	}}, tree{files: map[string]string{
		"keep": "k\n", "ln/": "", "ln/f.txt": "f\n", "sd": "->keep",
	}}},
	{"nested", tree{files: map[string]string{
		"lib": "x\n", "d/": "", "d/e/": "", "d/e/f.txt": "f\n", "d/g.txt": "g\n", "d-x": "sorts between\n",
	}}, tree{files: map[string]string{
		"lib/sub/deep.txt": "deep\n", "d": "file\n", "d-x": "sorts between\n",
	}}},
	{"renames into and out of", tree{files: map[string]string{
		"lib": "x\n", "other.txt": "moves under lib\n", "d/": "", "d/y.txt": "moves out of d\n",
	}}, tree{files: map[string]string{
		"lib/other.txt": "moves under lib\n", "moved.txt": "moves out of d\n", "d": "file\n",
	}}},
	{"binary", tree{files: map[string]string{
		"blob": "\x00\x01binary", "bd/": "", "bd/b.bin": "\x00\x02binary",
	}}, tree{files: map[string]string{
		"blob/x.txt": "x\n", "bd": "text now\n",
	}}},
}

// TestTypeChangePatchGitApply: the exported patch of type changes passes
// git apply --check and gives exactly the guest's tree, with and without
// binary patches.
func TestTypeChangePatchGitApply(t *testing.T) {
	needGit(t)
	for _, tc := range typeCases {
		for _, binary := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s binary=%v", tc.name, binary), func(t *testing.T) {
				fx := diffFixture(t, tc.old, tc.new)
				repo := gitRepo(t, fx.oldDir)
				patch, skips := Patch(fx.cs, ApproveAll(fx.cs), PatchOptions{Binary: binary})
				for _, sk := range skips {
					if f := fx.cs.File(sk.Path); f == nil || !f.IsDir() || f.TypeChange() != "" {
						t.Errorf("skipped %s: %s", sk.Path, sk.Reason)
					}
				}
				gitApply(t, repo, patch)
				if diff := cmp.Diff(snapshot(t, fx.newDir), snapshot(t, repo)); diff != "" {
					t.Errorf("git apply result (-want +got):\n%s\npatch:\n%s", diff, patch)
				}
			})
		}
	}
}

// TestTypeChangePatchOrder: a file that becomes a directory is deleted
// before anything is added under it; a directory that becomes a file is
// emptied before the file is added.
func TestTypeChangePatchOrder(t *testing.T) {
	fx := diffFixture(t, typeCases[3].old, typeCases[3].new)
	patch, _ := Patch(fx.cs, ApproveAll(fx.cs), PatchOptions{})
	var order []string
	for _, l := range strings.Split(string(patch), "\n") {
		if strings.HasPrefix(l, "diff --git ") {
			order = append(order, l)
		}
	}
	want := []string{
		"diff --git a/lib b/lib", // the file lib goes before lib/other.txt
		"diff --git a/other.txt b/lib/other.txt",
		"diff --git a/d/y.txt b/moved.txt", // d is emptied before it becomes a file
		"diff --git a/d b/d",
	}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("order (-want +got):\n%s\npatch:\n%s", diff, patch)
	}
}

// TestTypeChangeApplyThenUndo: airlock apply gives the guest's tree, and
// undo gives back the old one byte for byte.
func TestTypeChangeApplyThenUndo(t *testing.T) {
	for _, tc := range typeCases {
		t.Run(tc.name, func(t *testing.T) {
			fx := diffFixture(t, tc.old, tc.new)
			project := copyTree(t, fx.oldDir)
			before := snapshot(t, project)
			jd := journalDir(t)
			res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(snapshot(t, fx.newDir), snapshot(t, project)); diff != "" {
				t.Fatalf("after apply (-want +got):\n%s\nresult %+v", diff, res)
			}
			if len(res.Skipped)+len(res.Conflicts) != 0 || len(res.Applied) != len(fx.cs.Files) {
				t.Errorf("result: %+v", res)
			}
			if err := Undo(context.Background(), jd); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
				t.Errorf("after undo (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTypeChangeRecover crashes an apply of type changes after every
// number of steps; Recover rolls forward to the guest's tree (and Undo
// then back to the old one) or back to the old tree.
func TestTypeChangeRecover(t *testing.T) {
	for _, tc := range typeCases {
		t.Run(tc.name, func(t *testing.T) {
			fx := diffFixture(t, tc.old, tc.new)
			oldSnap, newSnap := snapshot(t, fx.oldDir), snapshot(t, fx.newDir)
			total := 0
			{
				project := copyTree(t, fx.oldDir)
				jd := journalDir(t)
				if _, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd}); err != nil {
					t.Fatal(err)
				}
				j, _ := ReadJournal(jd)
				total = len(j.Steps)
			}
			for k := 0; k <= total; k++ {
				for _, mode := range []RecoverMode{RollForward, RollBack} {
					project := copyTree(t, fx.oldDir)
					jd := journalDir(t)
					opts := ApplyOptions{JournalDir: jd, crash: func(done int) bool { return done == k }}
					if _, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), opts); !errors.Is(err, errCrashed) {
						t.Fatalf("k=%d: apply: %v", k, err)
					}
					if _, err := Recover(context.Background(), jd, mode); err != nil {
						t.Fatalf("k=%d mode=%d: recover: %v", k, mode, err)
					}
					want := newSnap
					if mode == RollBack {
						want = oldSnap
					}
					if diff := cmp.Diff(want, snapshot(t, project)); diff != "" {
						t.Fatalf("k=%d mode=%d (-want +got):\n%s", k, mode, diff)
					}
					if mode == RollForward {
						if err := Undo(context.Background(), jd); err != nil {
							t.Fatalf("k=%d: undo: %v", k, err)
						}
						if diff := cmp.Diff(oldSnap, snapshot(t, project)); diff != "" {
							t.Fatalf("k=%d undo after recover (-want +got):\n%s", k, diff)
						}
					}
				}
			}
		})
	}
}

// TestTypeChangeNeeds: approving what is under a file that becomes a
// directory without the file's change, or a directory that becomes a file
// without what empties it, is left out by Apply (nothing is written for
// it) and by the patch, naming the change it needs.
func TestTypeChangeNeeds(t *testing.T) {
	fx := diffFixture(t, typeCases[3].old, typeCases[3].new)
	cases := []struct {
		name    string
		approve []string
		want    []string // NeedError messages
	}{
		{"file under a file", []string{"lib/other.txt"}, []string{
			"lib/other.txt needs lib, a file today, to be removed: approve the change to lib too"}},
		{"file to dir alone", []string{"lib"}, nil},
		{"dir to file alone", []string{"d"}, []string{
			"d becomes a file and needs everything under it removed first: approve the change to moved.txt (renamed from d/y.txt) too"}},
		{"dir to file with what empties it", []string{"d", "moved.txt"}, nil},
		{"all", []string{"d", "moved.txt", "lib", "lib/other.txt"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d Decisions
			for _, p := range c.approve {
				d.SetFile(p, Approve)
			}
			var got []string
			for _, n := range d.Needs(fx.cs) {
				got = append(got, n.Error())
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("needs (-want +got):\n%s", diff)
			}
			project := copyTree(t, fx.oldDir)
			before := snapshot(t, project)
			res, err := Apply(context.Background(), project, fx.cs, d, ApplyOptions{JournalDir: journalDir(t)})
			if err != nil {
				t.Fatal(err)
			}
			if len(c.want) > 0 {
				if len(res.Skipped) != 1 || res.Skipped[0].Reason != c.want[0] || len(res.Applied) != 0 {
					t.Errorf("apply result: %+v", res)
				}
				if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
					t.Errorf("a refused change changed the project (-want +got):\n%s", diff)
				}
				_, skips := Patch(fx.cs, d, PatchOptions{})
				if len(skips) != 1 || skips[0].Reason != c.want[0] {
					t.Errorf("patch skips: %+v", skips)
				}
				return
			}
			fi, err := os.Lstat(filepath.Join(project, "lib"))
			if err != nil || fi.IsDir() != slices.Contains(c.approve, "lib") {
				t.Errorf("lib: %v %v", fi.Mode(), err)
			}
		})
	}
}

// TestTypeChangeKeepsUserFiles: a directory that becomes a file but holds
// a file the user added since the run stays a directory, and says why;
// the rest applies, and undo is byte for byte.
func TestTypeChangeKeepsUserFiles(t *testing.T) {
	fx := diffFixture(t, typeOld, typeNew)
	project := copyTree(t, fx.oldDir)
	writeFile(t, project, "d/mine.txt", "the user's\n")
	before := snapshot(t, project)
	jd := journalDir(t)
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd})
	if err != nil {
		t.Fatal(err)
	}
	want := "d/mine.txt"
	if data, err := os.ReadFile(filepath.Join(project, want)); err != nil || string(data) != "the user's\n" {
		t.Errorf("%s: %q %v", want, data, err)
	}
	if data, err := os.ReadFile(filepath.Join(project, "lib", "mod.txt")); err != nil || string(data) != "module\n" {
		t.Errorf("lib/mod.txt: %q %v", data, err)
	}
	var skipped []string
	for _, r := range res.Skipped {
		skipped = append(skipped, r.Path+": "+r.Reason)
	}
	if diff := cmp.Diff([]string{"d: directory not replaced by a file: it holds files the run did not know of; move them away and apply again"}, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	for _, r := range res.Applied {
		if r.Path == "d" {
			t.Errorf("d reported applied")
		}
	}
	if err := Undo(context.Background(), jd); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
		t.Errorf("after undo (-want +got):\n%s", diff)
	}
}

// TestTypeChangeConflictLeavesWhatIsUnder: a file that becomes a
// directory but was edited in the project since the run is a conflict;
// what the run put under it is skipped, saying why, and no empty
// directory is left.
func TestTypeChangeConflictLeavesWhatIsUnder(t *testing.T) {
	fx := diffFixture(t, typeOld, typeNew)
	project := copyTree(t, fx.oldDir)
	writeFile(t, project, "lib", "edited by the user\n")
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conflicts) != 1 || res.Conflicts[0].Path != "lib" {
		t.Errorf("conflicts: %+v", res.Conflicts)
	}
	if data, err := os.ReadFile(filepath.Join(project, "lib")); err != nil || string(data) != "edited by the user\n" {
		t.Errorf("lib: %q %v", data, err)
	}
	want := []FileResult{{Path: "lib/mod.txt", Reason: "lib is still a file: its change to a directory was not applied (see lib); left out"}}
	if diff := cmp.Diff(want, res.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}
