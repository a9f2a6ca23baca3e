package manifest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/google/go-cmp/cmp"
)

// Random edits, each reported as a watcher would (the path itself; a
// directory that appears, moves or goes away with its subtree): Rewalk
// from the previous manifest always equals a fresh Walk, exclusions
// included, and leaves a cache that a later Walk can trust.
func TestRewalkMatchesWalk(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 11))
	write := func(rel, body string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755)
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for d := range 4 {
		for f := range 3 {
			write(fmt.Sprintf("d%d/s%d/f%d.txt", d, f%2, f), fmt.Sprintf("%d/%d", d, f))
		}
	}
	write(".gitignore", "*.log\nignored/\n")
	write("d1/.gitignore", "*.tmp\n")
	write("ignored/x", "x")
	cache := &HashCache{}
	opts := WalkOptions{Excludes: []string{"d3/s1/"}, Cache: cache}
	prev, rep, err := Walk(ctx, root, opts)
	if err != nil {
		t.Fatal(err)
	}
	skipped := NoteworthyAll(rep.Excluded)
	// dirs lists the directories that may exist, files the names to use.
	dirs := []string{"", "d0", "d1", "d1/s0", "d2/s1", "d3/s1", "ignored", "new", "new/deep"}
	names := []string{"a.txt", "b.log", "c.tmp", "id_rsa", "s0", "bad\nname", "pipe"}
	for step := range 60 {
		var touched []Touched
		for range 1 + rng.IntN(4) {
			dir := dirs[rng.IntN(len(dirs))]
			rel := filepath.ToSlash(filepath.Join(dir, names[rng.IntN(len(names))]))
			full := filepath.Join(root, rel)
			info, statErr := os.Lstat(full)
			isDir := statErr == nil && info.IsDir()
			if info, err := os.Lstat(filepath.Join(root, dir)); err != nil || !info.IsDir() {
				// The parent is missing: create it and what it needs, as
				// new directories.
				top := dir
				for up := filepath.Dir(dir); up != "."; up = filepath.Dir(up) {
					if info, err := os.Lstat(filepath.Join(root, up)); err == nil && info.IsDir() {
						break
					}
					top = up
				}
				os.RemoveAll(filepath.Join(root, top))
				os.MkdirAll(filepath.Join(root, dir), 0o755)
				touched = append(touched, Touched{Path: top, Subtree: true})
			}
			switch op := rng.IntN(7); {
			case op == 0 && statErr == nil:
				os.RemoveAll(full)
				touched = append(touched, Touched{Path: rel, Subtree: isDir})
			case op == 1 && statErr == nil:
				to := rel + "-moved"
				os.RemoveAll(filepath.Join(root, to))
				os.Rename(full, filepath.Join(root, to))
				touched = append(touched, Touched{Path: rel, Subtree: isDir}, Touched{Path: to, Subtree: true})
			case op == 2 && statErr != nil:
				os.MkdirAll(filepath.Join(full, "in"), 0o755)
				os.WriteFile(filepath.Join(full, "in", "f"), []byte("f"), 0o644)
				touched = append(touched, Touched{Path: rel, Subtree: true})
			case op == 3 && statErr == nil && info.Mode()&os.ModeSymlink == 0: // chmod follows links
				os.Chmod(full, 0o700)
				touched = append(touched, Touched{Path: rel})
			case op == 4 && statErr != nil:
				os.Symlink("a.txt", full)
				touched = append(touched, Touched{Path: rel})
			case op == 5 && statErr != nil && names[len(names)-1] == filepath.Base(rel):
				if err := syscall.Mkfifo(full, 0o644); err != nil {
					testenv.Skip(t, testenv.Unix, err.Error())
				}
				touched = append(touched, Touched{Path: rel})
			case !isDir:
				os.Remove(full)
				os.WriteFile(full, []byte(fmt.Sprintf("step %d", step)), 0o644)
				touched = append(touched, Touched{Path: rel})
			}
		}
		if _, ok := RulesTouched(touched); ok {
			continue // a whole walk's business
		}
		got, grep, err := Rewalk(ctx, root, prev, skipped, touched, opts)
		if err != nil {
			t.Fatal(err)
		}
		want, wrep, err := Walk(ctx, root, WalkOptions{Excludes: opts.Excludes})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("step %d, touched %+v: (-walk +rewalk):\n%s", step, touched, diff)
		}
		if diff := cmp.Diff(NoteworthyAll(wrep.Excluded), NoteworthyAll(grep.Excluded)); diff != "" {
			t.Fatalf("step %d, touched %+v: exclusions (-walk +rewalk):\n%s", step, touched, diff)
		}
		if grep.Files != wrep.Files || grep.Dirs != wrep.Dirs || grep.Bytes != wrep.Bytes {
			t.Fatalf("step %d: report %+v, walk's %+v", step, grep, wrep)
		}
		prev, skipped = got, NoteworthyAll(grep.Excluded)
	}
	again, _, err := Walk(ctx, root, opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(prev, again); diff != "" {
		t.Fatalf("a walk with the rewalks' cache differs (-rewalk +walk):\n%s", diff)
	}
}
