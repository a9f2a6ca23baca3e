//go:build unix

package review

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// killCase is an apply to kill: the trees before and after, and how the
// changes between them are found (diff: as manifest.Diff reports them,
// with directories changing type; otherwise path by path, with renames).
type killCase struct {
	name     string
	old, new tree
	renames  map[string]string
	diff     bool
}

func killCases() []killCase {
	cases := []killCase{{name: "rich", old: richOld, new: richNew, renames: renames}}
	for _, tc := range typeCases {
		cases = append(cases, killCase{name: tc.name, old: tc.old, new: tc.new, diff: true})
	}
	return cases
}

// changeset builds the case's changeset from its trees written at oldDir
// and newDir: the parent test and the process it kills build the same.
func (kc killCase) changeset(t testing.TB, oldDir, newDir string) *Changeset {
	t.Helper()
	st := store{}
	o, n := scan(t, oldDir, st), scan(t, newDir, st)
	ch := changes(o, n, kc.renames)
	if kc.diff {
		ch = manifest.Diff(manifestOf(o), manifestOf(n))
	}
	cs, err := New(context.Background(), ch, st.source, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

const killEnv = "REVIEW_TEST_KILL"

// TestApplyKilled kills an apply with SIGKILL before each change it makes
// on disk in turn (every object, journal write, staged file, rename,
// removal, directory, link and sync), in a copy of the test binary, and
// checks what the next command finds: no journal and the project exactly
// as it was, or a journal from which Recover makes the project exactly
// the new tree (and Undo then exactly the old one) or, rolling back,
// exactly the old tree. Then the same for an undo of the whole apply.
func TestApplyKilled(t *testing.T) {
	if os.Getenv(killEnv) != "" {
		killedChild(t)
		return
	}
	if testing.Short() {
		t.Skip("kills a process per change on disk")
	}
	for ci, kc := range killCases() {
		t.Run(kc.name, func(t *testing.T) {
			base := t.TempDir()
			oldDir, newDir := filepath.Join(base, "old"), filepath.Join(base, "new")
			for _, d := range []string{oldDir, newDir} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			kc.old.write(t, oldDir)
			kc.new.write(t, newDir)
			oldSnap, newSnap := snapshot(t, oldDir), snapshot(t, newDir)

			// Count the changes on disk of a whole apply.
			total, ops := 0, map[string]int{}
			fsStepHook = func(op string) { total++; ops[op]++ }
			project := copyTree(t, oldDir)
			cs := kc.changeset(t, oldDir, newDir)
			_, err := Apply(context.Background(), project, cs, ApproveAll(cs), ApplyOptions{JournalDir: journalDir(t)})
			fsStepHook = nil
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(newSnap, snapshot(t, project)); diff != "" {
				t.Fatalf("apply (-want +got):\n%s", diff)
			}
			if total < 10 {
				t.Fatalf("only %d changes on disk", total)
			}
			// Durability is a batch: three syncs and two journal writes
			// whatever the number of files, no fsync of its own.
			if ops["sync"] != 3 || ops["journal"] != 2 || ops["fsync"] != 0 {
				t.Errorf("syncs and journal writes: %v", ops)
			}

			for n := 1; n <= total; n++ {
				for _, mode := range []RecoverMode{RollForward, RollBack} {
					project := copyTree(t, oldDir)
					jd := journalDir(t)
					killChild(t, n, "apply", ci, oldDir, newDir, project, jd)
					at := fmt.Sprintf("killed before change %d of %d", n, total)
					if _, err := ReadJournal(jd); errors.Is(err, os.ErrNotExist) {
						if diff := cmp.Diff(oldSnap, snapshot(t, project)); diff != "" {
							t.Fatalf("%s, no journal: the project changed (-want +got):\n%s", at, diff)
						}
						continue
					}
					state, err := Recover(context.Background(), jd, mode)
					if err != nil {
						t.Fatalf("%s: recover (mode %d): %v", at, mode, err)
					}
					want, wantState := newSnap, Applied
					if mode == RollBack {
						want, wantState = oldSnap, Undone
					}
					if state != wantState {
						t.Errorf("%s: recover (mode %d) left the journal %s", at, mode, state)
					}
					if diff := cmp.Diff(want, snapshot(t, project)); diff != "" {
						t.Fatalf("%s: recover (mode %d) (-want +got):\n%s", at, mode, diff)
					}
					if mode == RollForward {
						if err := Undo(context.Background(), jd); err != nil {
							t.Fatalf("%s: undo: %v", at, err)
						}
						if diff := cmp.Diff(oldSnap, snapshot(t, project)); diff != "" {
							t.Fatalf("%s: undo after recover (-want +got):\n%s", at, diff)
						}
					}
				}
			}

			// The same for an undo after the whole apply: the next
			// command finishes it, or finds the apply still in place
			// and undoes it.
			total = 0
			jd := journalDir(t)
			project = copyTree(t, oldDir)
			if _, err := Apply(context.Background(), project, cs, ApproveAll(cs), ApplyOptions{JournalDir: jd}); err != nil {
				t.Fatal(err)
			}
			fsStepHook = func(string) { total++ }
			err = Undo(context.Background(), jd)
			fsStepHook = nil
			if err != nil {
				t.Fatal(err)
			}
			if total < 5 {
				t.Fatalf("only %d changes on disk in an undo", total)
			}
			for n := 1; n <= total; n++ {
				project := copyTree(t, oldDir)
				jd := journalDir(t)
				killChild(t, n, "undo", ci, oldDir, newDir, project, jd)
				at := fmt.Sprintf("undo killed before change %d of %d", n, total)
				state, err := Recover(context.Background(), jd, RollForward)
				if err != nil {
					t.Fatalf("%s: recover: %v", at, err)
				}
				if state == Applied {
					if diff := cmp.Diff(newSnap, snapshot(t, project)); diff != "" {
						t.Fatalf("%s: still applied (-want +got):\n%s", at, diff)
					}
					if err := Undo(context.Background(), jd); err != nil {
						t.Fatalf("%s: undo again: %v", at, err)
					}
				}
				if diff := cmp.Diff(oldSnap, snapshot(t, project)); diff != "" {
					t.Fatalf("%s: recover (-want +got):\n%s", at, diff)
				}
			}
		})
	}
}

// killChild runs killedChild for what ("apply" or "undo") and checks that
// it was killed.
func killChild(t *testing.T, n int, what string, ci int, oldDir, newDir, project, jd string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestApplyKilled$", "-test.v")
	cmd.Env = append(os.Environ(), killEnv+"="+strconv.Itoa(n), "REVIEW_TEST_KILL_WHAT="+what,
		"REVIEW_TEST_KILL_CASE="+strconv.Itoa(ci), "REVIEW_TEST_KILL_OLD="+oldDir,
		"REVIEW_TEST_KILL_NEW="+newDir, "REVIEW_TEST_KILL_PROJECT="+project, "REVIEW_TEST_KILL_JOURNAL="+jd)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s n=%d: not killed: %v\n%s", what, n, err, out)
	}
}

// killedChild is TestApplyKilled in the process it kills: it applies the
// case (and undoes it) and SIGKILLs itself before the n-th change on disk
// of the apply (or the undo).
func killedChild(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(killEnv))
	ci, _ := strconv.Atoi(os.Getenv("REVIEW_TEST_KILL_CASE"))
	kc := killCases()[ci]
	cs := kc.changeset(t, os.Getenv("REVIEW_TEST_KILL_OLD"), os.Getenv("REVIEW_TEST_KILL_NEW"))
	count := 0
	kill := func(string) {
		if count++; count == n {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	defer func() { fsStepHook = nil }()
	what, jd := os.Getenv("REVIEW_TEST_KILL_WHAT"), os.Getenv("REVIEW_TEST_KILL_JOURNAL")
	if what == "apply" {
		fsStepHook = kill
	}
	_, err := Apply(context.Background(), os.Getenv("REVIEW_TEST_KILL_PROJECT"), cs, ApproveAll(cs), ApplyOptions{JournalDir: jd})
	if err == nil && what == "undo" {
		fsStepHook = kill
		err = Undo(context.Background(), jd)
	}
	t.Fatalf("%s finished (%v) without being killed at change %d", what, err, n)
}
