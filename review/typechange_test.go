package review

import (
	"context"
	"os"
	"path/filepath"
	"sort"
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

// TestTypeChangePatchGitApply: the exported patch of type changes passes
// git apply --check and gives exactly the guest's tree.
func TestTypeChangePatchGitApply(t *testing.T) {
	needGit(t)
	fx := diffFixture(t, typeOld, typeNew)
	repo := gitRepo(t, fx.oldDir)
	patch, skips := Patch(fx.cs, ApproveAll(fx.cs), PatchOptions{})
	t.Logf("patch:\n%s", patch)
	gitApply(t, repo, patch)
	if diff := cmp.Diff(snapshot(t, fx.newDir), snapshot(t, repo)); diff != "" {
		t.Errorf("git apply result (-want +got):\n%s\nskips %+v", diff, skips)
	}
}

// TestTypeChangeApplyThenUndo: airlock apply gives the guest's tree, and
// undo gives back the old one byte for byte.
func TestTypeChangeApplyThenUndo(t *testing.T) {
	fx := diffFixture(t, typeOld, typeNew)
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
	if len(res.Skipped)+len(res.Conflicts) != 0 {
		t.Errorf("result: %+v", res)
	}
	if err := Undo(context.Background(), jd); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
		t.Errorf("after undo (-want +got):\n%s", diff)
	}
}
