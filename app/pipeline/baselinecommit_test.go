package pipeline

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestSnapshotRecordsHeadCommit: the baseline keeps the commit the
// project had checked out (a branch made from the sandbox starts there),
// and nothing in a project that is not a repository.
func TestSnapshotRecordsHeadCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Skip(t, testenv.Git, "git not found")
	}
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	s, err := sandbox.Open(filepath.Join(t.TempDir(), "airlock"))
	if err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	writeTree(t, project, map[string]string{"a.txt": "a\n"})
	b, err := Snapshot(context.Background(), s, project, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Commit != "" {
		t.Errorf("a project without git has baseline commit %q", b.Commit)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=A", "-c", "user.email=a@example.com"}, args...)...)
		cmd.Dir = project
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "first")
	if b, err = Snapshot(context.Background(), s, project, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := git("rev-parse", "HEAD"); b.Commit != want {
		t.Errorf("baseline commit %q, want HEAD %s", b.Commit, want)
	}
}
