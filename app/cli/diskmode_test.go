package cli

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// randomProject writes a project of random files, directories, links and
// executables under dir, with a .gitignore, and returns its paths.
func randomProject(t *testing.T, dir string, rng *rand.Rand) (files, dirs []string) {
	t.Helper()
	dirs = []string{"."}
	for i := range 12 {
		d := filepath.Join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("d%d", i))
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	for i := range 60 {
		f := filepath.Join(dirs[rng.IntN(len(dirs))], fmt.Sprintf("f%d.txt", i))
		mode := os.FileMode(0o644)
		if rng.IntN(6) == 0 {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, f), fmt.Appendf(nil, "file %d\n%s", i, strings.Repeat("x", rng.IntN(3000))), mode); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	for i := range 3 {
		if err := os.Symlink(files[rng.IntN(len(files))], filepath.Join(dir, fmt.Sprintf("link%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.log\nbuild/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	return files, dirs[1:]
}

// changeScript is a shell script of random changes to a project made by
// randomProject: edits, adds, deletes, whole directories deleted and
// renamed, renames, mode changes, links, type changes both ways, hard
// links, empty directories, touches and rewrites that change nothing,
// and ignored files.
func changeScript(rng *rand.Rand, files, dirs []string) string {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	q := func(s string) string { return "'" + s + "'" }
	var b strings.Builder
	ops := []func(){
		func() { fmt.Fprintf(&b, "[ -f %s ] && echo edited >> %s || true\n", q(pick(files)), q(pick(files))) },
		func() {
			fmt.Fprintf(&b, "mkdir -p %s && echo new > %s/new%d.txt\n", q(pick(dirs)), q(pick(dirs)), rng.IntN(1000))
		},
		func() { fmt.Fprintf(&b, "rm -f %s\n", q(pick(files))) },
		func() { fmt.Fprintf(&b, "rm -rf %s\n", q(pick(dirs))) },
		func() {
			d := pick(dirs)
			fmt.Fprintf(&b, "[ -d %s ] && mv %s %s.moved || true\n", q(d), q(d), q(d))
		},
		func() {
			f := pick(files)
			fmt.Fprintf(&b, "[ -f %s ] && mv %s %s.renamed || true\n", q(f), q(f), q(f))
		},
		func() { fmt.Fprintf(&b, "[ -f %s ] && chmod +x %s || true\n", q(pick(files)), q(pick(files))) },
		func() { fmt.Fprintf(&b, "ln -sf %s newlink%d\n", q(pick(files)), rng.IntN(1000)) },
		func() {
			f := pick(files)
			fmt.Fprintf(&b, "if [ -f %s ]; then rm %s; mkdir %s; echo mod > %s/mod.txt; fi\n", q(f), q(f), q(f), q(f))
		},
		func() {
			d := pick(dirs)
			fmt.Fprintf(&b, "if [ -d %s ]; then rm -rf %s; echo now-a-file > %s; fi\n", q(d), q(d), q(d))
		},
		func() {
			f := pick(files)
			fmt.Fprintf(&b, "[ -f %s ] && ln %s %s.hard || true\n", q(f), q(f), q(f))
		},
		func() { fmt.Fprintf(&b, "mkdir -p %s/emptynew%d\n", q(pick(dirs)), rng.IntN(1000)) },
		func() { fmt.Fprintf(&b, "[ -f %s ] && touch %s || true\n", q(pick(files)), q(pick(files))) },
		func() {
			f := pick(files)
			fmt.Fprintf(&b, "if [ -f %s ]; then cat %s > /tmp/same; cat /tmp/same > %s; fi\n", q(f), q(f), q(f))
		},
		func() {
			fmt.Fprintf(&b, "echo ignored > ignored%d.log; mkdir -p build; echo out > build/out\n", rng.IntN(1000))
		},
	}
	for range 25 {
		ops[rng.IntN(len(ops))]()
	}
	// Every kind at least once.
	for _, op := range ops {
		op()
	}
	b.WriteString("exit 0\n") // a change that no longer applies is no failure
	return b.String()
}

// TestDiskModeSameChangesAsCopy runs random change scripts on random
// projects in a real VM in the copy and the disk sync modes: the
// changesets must be equal, and the disk mode's must apply to the same
// tree through `airlock apply` and through `airlock diff | git apply`.
func TestDiskModeSameChangesAsCopy(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("AIRLOCK_TEST_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (AIRLOCK_TEST_SEED repeats it)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for round := range 2 {
		project := t.TempDir()
		files, dirs := randomProject(t, project, rng)
		script := filepath.Join(t.TempDir(), "changes.sh")
		if err := os.WriteFile(script, []byte(changeScript(rng, files, dirs)), 0o644); err != nil {
			t.Fatal(err)
		}
		viaCopy := runJSON(t, home, "--project", project, "--sync", "copy", "--script", script)
		viaDisk := runJSON(t, home, "--project", project, "--sync", "disk", "--script", script)
		if viaDisk.SyncMode != sandbox.SyncDisk {
			t.Fatalf("round %d: sync mode %q, want disk", round, viaDisk.SyncMode)
		}
		if viaCopy.ExitCode != 0 || viaDisk.ExitCode != 0 {
			t.Fatalf("round %d: exit codes %d (copy), %d (disk)", round, viaCopy.ExitCode, viaDisk.ExitCode)
		}
		csCopy, csDisk := changesetOf(t, home, viaCopy.Sandbox), changesetOf(t, home, viaDisk.Sandbox)
		if len(csDisk.Files) == 0 {
			t.Fatalf("round %d: no changes in disk mode", round)
		}
		if diff := cmp.Diff(csCopy, csDisk, cmpopts.IgnoreUnexported(review.File{})); diff != "" {
			t.Fatalf("round %d: changesets differ (-copy +disk):\n%s", round, diff)
		}
		for _, f := range csDisk.Files {
			if strings.HasSuffix(f.Path, ".log") || strings.HasPrefix(f.Path, "build/") {
				t.Errorf("round %d: ignored file %s collected", round, f.Path)
			}
		}

		// diff | git apply and apply --all give the same tree.
		viaGit := t.TempDir()
		copyTree(t, project, viaGit)
		// As in a git checkout, which has no empty directories: one the
		// patch cannot name would stop a directory becoming a file.
		removeEmptyDirs(t, viaGit)
		code, patch, errOut := airlockCLI(t, home, "diff", viaDisk.Sandbox)
		if code != 0 {
			t.Fatalf("diff: %d %s", code, errOut)
		}
		cmd := exec.Command("git", "apply", "--unsafe-paths", "-")
		cmd.Dir, cmd.Stdin = viaGit, strings.NewReader(patch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("round %d: git apply: %v\n%s\npatch:\n%s", round, err, out, patch)
		}
		if code, _, errOut := airlockCLI(t, home, "apply", viaDisk.Sandbox, "--all", "--include-host-exec"); code != 0 {
			t.Fatalf("round %d: apply: %d %s", round, code, errOut)
		}
		// (git has no empty directories: compare what is not a directory.)
		noDirs := cmpopts.IgnoreMapEntries(func(_ string, e entry) bool { return e.Mode.IsDir() })
		if diff := cmp.Diff(treeState(t, viaGit), treeState(t, project), noDirs); diff != "" {
			t.Errorf("round %d: git apply and airlock apply differ (-git +airlock):\n%s", round, diff)
		}
	}
}

// removeEmptyDirs removes the empty directories under root (not root),
// deepest first, so a directory holding only empty ones goes too.
func removeEmptyDirs(t *testing.T, root string) {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != root {
			dirs = append(dirs, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range slices.Backward(dirs) {
		if entries, err := os.ReadDir(d); err == nil && len(entries) == 0 {
			if err := os.Remove(d); err != nil {
				t.Fatal(err)
			}
		}
	}
}
