package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestDiskModeLayers runs a project in the disk sync mode, replies to
// it, then edits the project on the host and fans out two attempts: the
// reply round (the first round's baseline plus its changes) and the
// attempts (the edited project) are each a delta over the first run's
// full disk, and each sees its baseline in /workspace.
func TestDiskModeLayers(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	project := t.TempDir()
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte(`set -e
if [ -n "$AIRLOCK_ATTEMPT" ]; then
  grep -q edited-on-the-host NOTE.txt
  test ! -e ANSWER.txt
  echo "attempt $AIRLOCK_ATTEMPT" > ATTEMPT.txt
elif [ -z "$AIRLOCK_ROUND" ]; then
  echo "first try" > ANSWER.txt
else
  test "$(cat ANSWER.txt)" = "first try"
  test ! -e NOTE.txt
  echo "second try" > ANSWER.txt
fi
`), 0o644); err != nil {
		t.Fatal(err)
	}
	first := runJSON(t, home, "--project", project, "--sync", "disk", "--script", script)
	if first.ExitCode != 0 || first.SyncMode != sandbox.SyncDisk {
		t.Fatalf("run: exit %d, sync mode %s", first.ExitCode, first.SyncMode)
	}
	st, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	// pushes returns the disks of each push of sandbox id.
	pushes := func(id string) []map[string]any {
		t.Helper()
		sb, err := st.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := sb.ReadAudit()
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, ev := range evs {
			if d, ok := ev.Data.(map[string]any); ok && ev.Event == sandbox.EventPushed {
				out = append(out, d)
			}
		}
		return out
	}
	p := pushes(first.Sandbox)
	if len(p) != 1 || p[0]["base_disk"] == nil || p[0]["baseline"] != p[0]["base_disk"] {
		t.Fatalf("the first run's push: %v, want its own full disk", p)
	}
	base := p[0]["base_disk"]

	if code, out, errOut := airlockCLI(t, home, "reply", first.Sandbox, "--message", "Try again."); code != 0 {
		t.Fatalf("reply: exit %d\n%s%s", code, out, errOut)
	}
	p = pushes(first.Sandbox)
	if len(p) != 2 || p[1]["base_disk"] != base || p[1]["baseline"] == base || p[1]["delta_disk"] == p[0]["delta_disk"] {
		t.Fatalf("the reply round's push: %v, want a delta over %v", p, base)
	}

	if err := os.WriteFile(filepath.Join(project, "NOTE.txt"), []byte("edited-on-the-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--sync", "disk", "--project", project,
		"--script", script, "--fan-out", "2", "--parallel", "2"); code != 0 {
		t.Fatalf("run --fan-out 2: exit %d\n%s%s", code, out, errOut)
	}
	list, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	var delta any
	attempts := 0
	for _, m := range list {
		if m.Group == "" {
			continue
		}
		attempts++
		if m.ExitCode == nil || *m.ExitCode != 0 {
			t.Errorf("attempt %d: exit %v (it did not see the edited project)", m.Attempt, m.ExitCode)
		}
		p := pushes(m.ID)
		if len(p) != 1 || p[0]["base_disk"] != base || p[0]["baseline"] == base {
			t.Errorf("attempt %d's push: %v, want a delta over %v", m.Attempt, p, base)
			continue
		}
		if delta != nil && p[0]["delta_disk"] != delta {
			t.Errorf("the attempts have different delta disks: %v, %v", delta, p[0]["delta_disk"])
		}
		delta = p[0]["delta_disk"]
	}
	if attempts != 2 {
		t.Errorf("%d attempts, want 2", attempts)
	}
}
