package review

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/google/go-cmp/cmp"
)

var renames = map[string]string{"dir/old.txt": "dir/new.txt"}

func journalDir(t *testing.T) string { return filepath.Join(t.TempDir(), "journal") }

func TestApplyAllThenUndo(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	before := snapshot(t, project)
	jd := journalDir(t)
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot(t, fx.newDir), snapshot(t, project)); diff != "" {
		t.Fatalf("after apply (-want +got):\n%s", diff)
	}
	if len(res.Applied) != len(fx.cs.Files) || len(res.Conflicts)+len(res.Merged)+len(res.Skipped) != 0 {
		t.Errorf("result: %+v", res)
	}
	for _, r := range res.Applied {
		if r.Path == "a.txt" && (r.BeforeSHA256 != fx.cs.File("a.txt").Old.SHA256 || r.AfterSHA256 != fx.cs.File("a.txt").New.SHA256) {
			t.Errorf("a.txt hashes %s -> %s", r.BeforeSHA256, r.AfterSHA256)
		}
	}
	if j, err := ReadJournal(jd); err != nil || j.State != Applied {
		t.Fatalf("journal: %v %+v", err, j)
	}
	if err := Undo(context.Background(), jd); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, project)); diff != "" {
		t.Errorf("after undo (-want +got):\n%s", diff)
	}
	if err := Undo(context.Background(), jd); err != nil {
		t.Errorf("second undo: %v", err)
	}
}

func TestApplyPartialHunks(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	var d Decisions
	d.SetHunk("a.txt", 1, Approve)
	d.SetFile("mode.sh", Reject)
	d.SetFile("link", Approve)
	res, err := Apply(context.Background(), project, fx.cs, d, ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(project, "a.txt"))
	want := numbered(30, map[int]string{25: "line 25\nline 25b\n"})
	if string(got) != want {
		t.Errorf("a.txt = %q", got)
	}
	if target, _ := os.Readlink(filepath.Join(project, "link")); target != "noeol.txt" {
		t.Errorf("link -> %q", target)
	}
	if fi, _ := os.Stat(filepath.Join(project, "mode.sh")); fi.Mode().Perm() != 0o644 {
		t.Errorf("rejected mode change applied: %v", fi.Mode())
	}
	if len(res.Applied) != 2 {
		t.Errorf("applied %+v", res.Applied)
	}
}

func TestApplyMergesUserEdits(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	// The user edited a.txt far from the agent's changes, and noeol.txt on
	// the same line as the agent, and removed.txt which the agent deletes.
	userA := numbered(30, map[int]string{15: "user line 15\n"})
	writeFile(t, project, "a.txt", userA)
	writeFile(t, project, "noeol.txt", "x\nuser")
	writeFile(t, project, "removed.txt", "gone\nsoon\nbut kept\n")
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(project, "a.txt"))
	want := numbered(30, map[int]string{3: "line three\n", 4: "", 15: "user line 15\n", 25: "line 25\nline 25b\n"})
	if string(got) != want {
		t.Errorf("merged a.txt = %q", got)
	}
	if len(res.Merged) != 1 || res.Merged[0].Path != "a.txt" {
		t.Errorf("merged = %+v", res.Merged)
	}
	conflicts := map[string]*ConflictError{}
	for _, c := range res.Conflicts {
		conflicts[c.Path] = c
	}
	if c := conflicts["noeol.txt"]; c == nil || c.Merge == nil || c.Merge.Clean() || string(c.Ours) != "x\nuser" || string(c.Theirs) != "x\nz" || string(c.Base) != "x\ny" {
		t.Errorf("noeol.txt conflict = %+v", c)
	}
	if c := conflicts["removed.txt"]; c == nil {
		t.Error("removed.txt: no conflict")
	}
	if data, _ := os.ReadFile(filepath.Join(project, "noeol.txt")); string(data) != "x\nuser" {
		t.Errorf("conflicted file touched: %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(project, "removed.txt")); string(data) != "gone\nsoon\nbut kept\n" {
		t.Errorf("conflicted deletion touched: %q", data)
	}
	var ce *ConflictError
	if !errors.As(error(conflicts["noeol.txt"]), &ce) || !strings.Contains(ce.Error(), "left as it is") {
		t.Errorf("conflict message: %v", ce)
	}
}

func TestApplyKeepsUserModeWhenAgentDidNotChangeIt(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	if err := os.Chmod(filepath.Join(project, "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	var d Decisions
	d.SetFile("a.txt", Approve)
	res, err := Apply(context.Background(), project, fx.cs, d, ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(project, "a.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v", fi.Mode())
	}
	if len(res.Applied) != 1 {
		t.Errorf("result %+v", res)
	}
}

func TestUndoRefusesAfterUserEdit(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	jd := journalDir(t)
	if _, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, project, "a.txt", "edited after apply\n")
	after := snapshot(t, project)
	var ue *UndoError
	if err := Undo(context.Background(), jd); !errors.As(err, &ue) || len(ue.Paths) != 1 || ue.Paths[0] != "a.txt" {
		t.Fatalf("undo: %v", err)
	}
	if snapshot(t, project) != after {
		t.Error("undo changed the project despite refusing")
	}
}

// TestRecover crashes an apply after every possible number of steps and
// checks that Recover rolls forward to exactly the new tree, or back to
// exactly the old one.
func TestRecover(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
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
	if total < 10 {
		t.Fatalf("only %d steps", total)
	}
	for k := 0; k <= total; k++ {
		for _, mode := range []RecoverMode{RollForward, RollBack} {
			project := copyTree(t, fx.oldDir)
			jd := journalDir(t)
			opts := ApplyOptions{JournalDir: jd, crash: func(done int) bool { return done == k }}
			_, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), opts)
			if !errors.Is(err, errCrashed) {
				t.Fatalf("k=%d: apply: %v", k, err)
			}
			state, err := Recover(context.Background(), jd, mode)
			if err != nil {
				t.Fatalf("k=%d mode=%d: recover: %v", k, mode, err)
			}
			want, wantState := newSnap, Applied
			if mode == RollBack {
				want, wantState = oldSnap, Undone
			}
			if state != wantState {
				t.Errorf("k=%d: state %s", k, state)
			}
			if diff := cmp.Diff(want, snapshot(t, project)); diff != "" {
				t.Fatalf("k=%d mode=%d (-want +got):\n%s", k, mode, diff)
			}
			if mode == RollForward {
				if err := Undo(context.Background(), jd); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(oldSnap, snapshot(t, project)); diff != "" {
					t.Fatalf("k=%d undo after recover (-want +got):\n%s", k, diff)
				}
			}
		}
	}
}

// TestRecoverInterruptedUndo crashes between rolling back and marking the
// journal undone; Recover finishes the undo.
func TestRecoverInterruptedUndo(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	jd := journalDir(t)
	if _, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd}); err != nil {
		t.Fatal(err)
	}
	j, _ := ReadJournal(jd)
	if err := (journalStore{dir: jd}).setState(j, Undoing); err != nil {
		t.Fatal(err)
	}
	if state, err := Recover(context.Background(), jd, RollForward); err != nil || state != Undone {
		t.Fatalf("recover: %s %v", state, err)
	}
	if diff := cmp.Diff(snapshot(t, fx.oldDir), snapshot(t, project)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestApplyRefusesSymlinkedParent(t *testing.T) {
	outside := t.TempDir()
	fx := newFixture(t, tree{files: map[string]string{"keep.txt": "k\n"}},
		tree{files: map[string]string{"keep.txt": "k\n", "sub/x.txt": "evil\n"}}, nil)
	project := copyTree(t, fx.oldDir)
	if err := os.Symlink(outside, filepath.Join(project, "sub")); err != nil {
		t.Fatal(err)
	}
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("wrote outside the project: %v", ents)
	}
	if len(res.Applied) != 0 || len(res.Skipped)+len(res.Conflicts) == 0 {
		t.Errorf("result %+v", res)
	}
}

func TestApplySkipsEscapingSymlink(t *testing.T) {
	fx := newFixture(t, tree{files: map[string]string{"keep.txt": "k\n"}},
		tree{files: map[string]string{"keep.txt": "k\n", "etc": "->/etc", "up": "->../../x", "ok": "->keep.txt"}}, nil)
	project := copyTree(t, fx.oldDir)
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for _, s := range res.Skipped {
		skipped = append(skipped, s.Path)
	}
	if diff := cmp.Diff([]string{"etc", "up"}, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if target, _ := os.Readlink(filepath.Join(project, "ok")); target != "keep.txt" {
		t.Errorf("ok -> %q", target)
	}
	res, err = Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: journalDir(t), AllowEscapingSymlinks: true})
	if err != nil || len(res.Applied) != 2 {
		t.Fatalf("allowed: %v %+v", err, res)
	}
	if target, _ := os.Readlink(filepath.Join(project, "etc")); target != "/etc" {
		t.Errorf("etc -> %q", target)
	}
}

func TestApplyDropsSpecialModeBits(t *testing.T) {
	data := []byte("#!/bin/sh\n")
	e := manifest.Entry{Path: "suid", Type: manifest.File, Mode: 0o4755 | 0o2000 | 0o1000, SHA256: sha256Hex(data)}
	s := store{e.SHA256: data}
	cs, err := New(context.Background(), []manifest.Change{{Kind: manifest.Added, Path: "suid", New: &e}}, s.source, Options{})
	if err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	if _, err := Apply(context.Background(), project, cs, ApproveAll(cs), ApplyOptions{JournalDir: journalDir(t)}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(project, "suid"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o755 {
		t.Errorf("mode = %v", fi.Mode())
	}
}

func TestApplyRejectsJournalInsideProject(t *testing.T) {
	fx := newFixture(t, richOld, richNew, nil)
	project := copyTree(t, fx.oldDir)
	_, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: filepath.Join(project, ".airlock")})
	if err == nil || !strings.Contains(err.Error(), "inside the project") {
		t.Errorf("err = %v", err)
	}
	if _, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{}); err == nil {
		t.Error("no journal dir accepted")
	}
}

func TestApplyTwiceSkips(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	if _, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: journalDir(t)}); err != nil {
		t.Fatal(err)
	}
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied)+len(res.Merged) != 0 {
		t.Errorf("second apply changed things: %+v", res)
	}
	if diff := cmp.Diff(snapshot(t, fx.newDir), snapshot(t, project)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestApplyCanceled(t *testing.T) {
	fx := newFixture(t, richOld, richNew, nil)
	project := copyTree(t, fx.oldDir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Apply(ctx, project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: journalDir(t)}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if diff := cmp.Diff(snapshot(t, fx.oldDir), snapshot(t, project)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func writeFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	fi, err := os.Stat(p)
	mode := os.FileMode(0o644)
	if err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestApplyKeepsDirectoryWithUserFiles(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	writeFile(t, project, "gone/mine.txt", "the user's\n")
	jd := journalDir(t)
	res, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd})
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(project, "gone/mine.txt")); err != nil || string(data) != "the user's\n" {
		t.Fatalf("user file: %q %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(project, "gone/f.txt")); !os.IsNotExist(err) {
		t.Errorf("gone/f.txt not removed: %v", err)
	}
	found := false
	for _, s := range res.Skipped {
		found = found || s.Path == "gone"
	}
	if !found {
		t.Errorf("gone not reported as skipped: %+v", res.Skipped)
	}
	if err := Undo(context.Background(), jd); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(project, "gone/f.txt")); string(data) != "bye\n" {
		t.Errorf("undo did not restore gone/f.txt: %q", data)
	}
}

func TestApplyUserDeletedEditedFile(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	if err := os.Remove(filepath.Join(project, "a.txt")); err != nil {
		t.Fatal(err)
	}
	var d Decisions
	d.SetFile("a.txt", Approve)
	res, err := Apply(context.Background(), project, fx.cs, d, ApplyOptions{JournalDir: journalDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0].Reason, "removed it") {
		t.Errorf("result %+v", res)
	}
	if _, err := os.Lstat(filepath.Join(project, "a.txt")); !os.IsNotExist(err) {
		t.Error("a.txt recreated over the user's deletion")
	}
}

func TestRecoverRemovesTempFiles(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	jd := journalDir(t)
	_, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd, crash: func(done int) bool { return done == 3 }})
	if !errors.Is(err, errCrashed) {
		t.Fatal(err)
	}
	writeFile(t, project, ".airlock-0123456789ab.tmp", "half written")
	if _, err := Recover(context.Background(), jd, RollBack); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot(t, fx.oldDir), snapshot(t, project)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
