package review

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gitFile is one file of `git diff` output, parsed.
type gitFile struct {
	Hunks          []Hunk
	Added, Removed int
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// parseGitDiff parses the hunks of a unified git diff, keyed by the path
// after prefix (e.g. "b/new/").
func parseGitDiff(t *testing.T, out, oldPrefix, newPrefix string) map[string]*gitFile {
	t.Helper()
	files := map[string]*gitFile{}
	var cur *gitFile
	var h *Hunk
	flush := func() {
		if h != nil {
			cur.Hunks = append(cur.Hunks, *h)
			h = nil
		}
	}
	var minusPath string
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		body := strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(body, "diff --git "):
			if cur != nil {
				flush()
			}
			cur = nil
		case h == nil && strings.HasPrefix(body, "--- "):
			minusPath = strings.TrimPrefix(strings.TrimPrefix(body, "--- "), oldPrefix)
		case h == nil && strings.HasPrefix(body, "+++ "):
			p := strings.TrimPrefix(body, "+++ ")
			if p == "/dev/null" {
				p = minusPath
			} else {
				p = strings.TrimPrefix(p, newPrefix)
			}
			cur = &gitFile{}
			files[p] = cur
		case strings.HasPrefix(body, "@@"):
			flush()
			m := hunkHeader.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("bad hunk header %q", body)
			}
			num := func(s string, def int) int {
				if s == "" {
					return def
				}
				n, _ := strconv.Atoi(s)
				return n
			}
			h = &Hunk{OldStart: num(m[1], 0), OldLines: num(m[2], 1), NewStart: num(m[3], 0), NewLines: num(m[4], 1)}
		case h != nil && strings.HasPrefix(body, `\ `):
			h.Lines[len(h.Lines)-1].NoEOL = true
		case h != nil && len(body) > 0 && strings.ContainsRune(" +-", rune(body[0])):
			l := Line{Kind: LineKind(body[:1]), Text: body[1:]}
			switch l.Kind {
			case Insert:
				h.Added++
				cur.Added++
			case Delete:
				h.Removed++
				cur.Removed++
			}
			h.Lines = append(h.Lines, l)
		default:
			flush()
		}
	}
	if cur != nil {
		flush()
	}
	return files
}

func gitDiffNoIndex(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "core.quotepath=off", "diff", "--no-index", "--no-color", "--no-ext-diff", "--no-renames"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		err = nil // differences found
	}
	if err != nil {
		t.Fatalf("git diff: %v", err)
	}
	return string(out)
}

// TestHunksAgreeWithGitDiff compares every text file's hunks and stats with
// `git diff --no-index` on the same two trees.
func TestHunksAgreeWithGitDiff(t *testing.T) {
	needGit(t)
	fx := newFixture(t, richOld, richNew, nil)
	base := filepath.Dir(fx.oldDir)
	git := parseGitDiff(t, gitDiffNoIndex(t, base, "old", "new"), "a/old/", "b/new/")
	compared := 0
	for _, f := range fx.cs.Files {
		if f.Binary || f.IsDir() || f.Status == TypeChanged || f.Status == ModeChanged {
			continue
		}
		g, ok := git[f.Path]
		if !ok {
			if len(f.Hunks) > 0 {
				t.Errorf("%s: git shows no hunks, we have %d", f.Path, len(f.Hunks))
			}
			continue
		}
		compared++
		if diff := cmp.Diff(g.Hunks, f.Hunks, cmp.Comparer(func(a, b []Line) bool { return cmp.Equal(a, b) })); diff != "" {
			t.Errorf("%s: hunks differ from git (-git +ours):\n%s", f.Path, diff)
		}
		if g.Added != f.Added || g.Removed != f.Removed {
			t.Errorf("%s: stats +%d -%d, git +%d -%d", f.Path, f.Added, f.Removed, g.Added, g.Removed)
		}
	}
	if compared < 8 {
		t.Errorf("compared only %d files with git", compared)
	}
}

// TestPatchGitApply exports the fully approved changeset and applies it
// with git apply to a repository holding the old tree.
func TestPatchGitApply(t *testing.T) {
	needGit(t)
	fx := newFixture(t, richOld, richNew, map[string]string{"dir/old.txt": "dir/new.txt"})
	repo := gitRepo(t, fx.oldDir)
	patch, skips := Patch(fx.cs, ApproveAll(fx.cs), PatchOptions{})
	gitApply(t, repo, patch)
	want := dropLines(snapshot(t, fx.newDir), "bin.dat", "newbin.dat", "oldbin.dat", "sub dir", "sub/deep dir")
	got := dropLines(snapshot(t, repo), "bin.dat", "newbin.dat", "oldbin.dat", "sub dir", "sub/deep dir")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("git apply result (-want +got):\n%s\npatch:\n%s", diff, patch)
	}
	var skipped []string
	for _, s := range skips {
		skipped = append(skipped, s.Path)
	}
	if diff := cmp.Diff([]string{"bin.dat", "gone", "newbin.dat", "oldbin.dat", "sub", "sub/deep"}, skipped); diff != "" {
		t.Errorf("skips (-want +got):\n%s", diff)
	}
}

// TestPatchPartialGitApply approves a subset of files and hunks and checks
// git apply produces exactly the bytes Resolve computes.
func TestPatchPartialGitApply(t *testing.T) {
	needGit(t)
	fx := newFixture(t, richOld, richNew, nil)
	for _, sel := range []map[int]Verdict{{0: Approve}, {1: Approve}, {0: Reject, 1: Approve}} {
		var d Decisions
		d.SetFile("noeol.txt", Approve)
		d.SetFile("removed.txt", Approve)
		for i, v := range sel {
			d.SetHunk("a.txt", i, v)
		}
		repo := gitRepo(t, fx.oldDir)
		patch, _ := Patch(fx.cs, d, PatchOptions{})
		gitApply(t, repo, patch)
		outs := d.Resolve(fx.cs.File("a.txt"))
		got, err := os.ReadFile(filepath.Join(repo, "a.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 1 || string(outs[0].Content) != string(got) {
			t.Errorf("selection %v: git apply gave\n%s\nResolve gave\n%+v\npatch:\n%s", sel, got, outs, patch)
		}
		if _, err := os.Lstat(filepath.Join(repo, "removed.txt")); !os.IsNotExist(err) {
			t.Errorf("removed.txt still there: %v", err)
		}
		if data, _ := os.ReadFile(filepath.Join(repo, "noeol.txt")); string(data) != "x\nz" {
			t.Errorf("noeol.txt = %q", data)
		}
	}
}

func gitRepo(t *testing.T, src string) string {
	t.Helper()
	repo := copyTree(t, src)
	run(t, repo, "git", "init", "-q")
	run(t, repo, "git", "add", "-A")
	run(t, repo, "git", "commit", "-q", "-m", "base")
	return repo
}

func gitApply(t *testing.T, repo string, patch []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.patch")
	if err := os.WriteFile(p, patch, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, repo, "git", "apply", "--check", p)
	run(t, repo, "git", "apply", p)
}

func dropLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		drop := false
		for _, p := range prefixes {
			if strings.HasPrefix(l, p+" ") {
				drop = true
			}
		}
		if !drop {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLargeScatteredDiffAgreesWithGit checks a big file with hundreds of
// scattered edits, past the LCS library's search bound: hunks stay one per
// edit and agree with git.
func TestLargeScatteredDiffAgreesWithGit(t *testing.T) {
	needGit(t)
	edits := map[int]string{}
	for i := 5; i < 20000; i += 37 {
		edits[i] = fmt.Sprintf("edited %d\n", i)
	}
	fx := newFixture(t, tree{files: map[string]string{"big.txt": numbered(20000, nil)}},
		tree{files: map[string]string{"big.txt": numbered(20000, edits)}}, nil)
	f := fx.cs.File("big.txt")
	if len(f.Hunks) != len(edits) || f.Added != len(edits) || f.Removed != len(edits) {
		t.Errorf("%d hunks +%d -%d for %d edits", len(f.Hunks), f.Added, f.Removed, len(edits))
	}
	git := parseGitDiff(t, gitDiffNoIndex(t, filepath.Dir(fx.oldDir), "old", "new"), "a/old/", "b/new/")
	if diff := cmp.Diff(git["big.txt"].Hunks, f.Hunks); diff != "" {
		t.Errorf("hunks differ from git (-git +ours):\n%s", diff)
	}
}

// TestPatchBinaryGitApply exports binary files as GIT binary patches and
// checks git apply rebuilds them byte for byte.
func TestPatchBinaryGitApply(t *testing.T) {
	needGit(t)
	fx := newFixture(t, richOld, richNew, map[string]string{"dir/old.txt": "dir/new.txt"})
	repo := gitRepo(t, fx.oldDir)
	patch, skips := Patch(fx.cs, ApproveAll(fx.cs), PatchOptions{Binary: true})
	gitApply(t, repo, patch)
	want := dropLines(snapshot(t, fx.newDir), "sub dir", "sub/deep dir")
	got := dropLines(snapshot(t, repo), "sub dir", "sub/deep dir")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("git apply result (-want +got):\n%s", diff)
	}
	if len(skips) != 3 {
		t.Errorf("skips: %+v", skips)
	}
}
