package review

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchTree is a project of n text files of about 3.2 kB in 30
// directories, and the same files each with two lines changed.
func benchTree(n int) (oldT, newT tree) {
	oldT, newT = tree{files: map[string]string{}}, tree{files: map[string]string{}}
	for i := range n {
		p := fmt.Sprintf("pkg%02d/file%04d.go", i%30, i)
		var lines []string
		for l := range 64 {
			lines = append(lines, fmt.Sprintf("// %04d line %02d of a file about this long, padded.....", i, l))
		}
		oldT.files[p] = strings.Join(lines, "\n") + "\n"
		lines[10] = fmt.Sprintf("// %04d line 10 changed by the agent, padded to the same length.", i)
		lines[50] = fmt.Sprintf("// %04d line 50 changed by the agent, padded to the same length.", i)
		newT.files[p] = strings.Join(lines, "\n") + "\n"
	}
	return oldT, newT
}

// BenchmarkApply times Apply of 3000 changed files of 3.2 kB (journal,
// backups, every byte durable) against `git apply` of the same changes as
// review.Patch renders them followed by `sync`, on copies of the same git
// repository, in the same run; it reports both and the ratio (Apply /
// git apply + sync), and how long Undo of the apply takes (outside the
// benchmark's time). Each copy is synced before it is timed.
func BenchmarkApply(b *testing.B) {
	needGit(b)
	if _, err := exec.LookPath("sync"); err != nil {
		b.Skip("no sync command")
	}
	n := 3000
	if testing.Short() {
		n = 300
	}
	oldT, newT := benchTree(n)
	fx := newFixture(b, oldT, newT, nil)
	if len(fx.cs.Files) != n || len(fx.cs.Files[0].Hunks) == 0 {
		b.Fatalf("%d changed files", len(fx.cs.Files))
	}
	for _, f := range fx.cs.Files {
		if len(f.oldData) < 3200 {
			b.Fatalf("%s: %d bytes", f.Path, len(f.oldData))
		}
	}
	run(b, fx.oldDir, "git", "init", "-q")
	run(b, fx.oldDir, "git", "add", "-A")
	run(b, fx.oldDir, "git", "commit", "-qm", "base")
	patch, skips := Patch(fx.cs, ApproveAll(fx.cs), PatchOptions{})
	if len(skips) != 0 {
		b.Fatalf("patch skips %v", skips)
	}
	patchFile := filepath.Join(b.TempDir(), "changes.patch")
	if err := os.WriteFile(patchFile, patch, 0o600); err != nil {
		b.Fatal(err)
	}
	want, old := snapshot(b, fx.newDir), snapshot(b, fx.oldDir)
	fresh := func() string {
		p := copyTree(b, fx.oldDir)
		run(b, p, "sync")
		return p
	}
	var ours, git, undo time.Duration
	rounds := 0
	for b.Loop() {
		b.StopTimer()
		project := fresh()
		jd := filepath.Join(b.TempDir(), "journal")
		b.StartTimer()
		start := time.Now()
		if _, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd}); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)
		b.StopTimer()
		if got := snapshot(b, project); got != want {
			b.Fatal("Apply did not make the new tree")
		}
		start = time.Now()
		if err := Undo(context.Background(), jd); err != nil {
			b.Fatal(err)
		}
		undo += time.Since(start)
		if got := snapshot(b, project); got != old {
			b.Fatal("Undo did not give the old tree back")
		}

		project = fresh()
		b.StartTimer()
		start = time.Now()
		cmd := exec.Command("git", "apply", patchFile)
		cmd.Dir = project
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("git apply: %v\n%s", err, stderr.String())
		}
		run(b, project, "sync")
		git += time.Since(start)
		b.StopTimer()
		if got := snapshot(b, project); got != want {
			b.Fatal("git apply did not make the new tree")
		}
		b.StartTimer()
		rounds++
	}
	b.ReportMetric(float64(ours.Milliseconds())/float64(rounds), "ms/apply")
	b.ReportMetric(float64(git.Milliseconds())/float64(rounds), "ms/git-apply+sync")
	b.ReportMetric(float64(ours)/float64(git), "ratio")
	b.ReportMetric(float64(undo.Milliseconds())/float64(rounds), "ms/undo")
	b.Logf("%d files: Apply %v, git apply + sync %v, ratio %.2f; Undo %v (mean of %d)", n, ours/time.Duration(rounds), git/time.Duration(rounds), float64(ours)/float64(git), undo/time.Duration(rounds), rounds)
}
