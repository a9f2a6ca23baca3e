package mcp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestCollectKept runs a command in a kept VM after its run (airlock
// exec ID) and finds its changes reviewable only once airlock collect
// took them; a second collect takes a deletion too; an applied sandbox
// is not collected again.
func TestCollectKept(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := clitest.Run(t, home, nil, "--json", "run", "--keep", "--project", proj, "--", "sh", "-c", "echo two >> a.txt")
	if code != 0 {
		t.Fatalf("run --keep: exit %d\n%s\n%s", code, out, errOut)
	}
	var res struct {
		Sandbox string `json:"sandbox"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sandbox == "" {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	id := res.Sandbox
	t.Cleanup(func() { clitest.Run(t, home, nil, "stop", "--kill", id) })
	stat := func() string {
		t.Helper()
		code, out, errOut := clitest.Run(t, home, nil, "diff", id, "--stat")
		if code != 0 {
			t.Fatalf("diff --stat: exit %d\n%s\n%s", code, out, errOut)
		}
		return out
	}
	if code, out, errOut := clitest.Run(t, home, nil, "exec", id, "--", "sh", "-c", "echo new > made.txt"); code != 0 {
		t.Fatalf("exec: exit %d\n%s\n%s", code, out, errOut)
	}
	if s := stat(); strings.Contains(s, "made.txt") || !strings.Contains(s, "a.txt") {
		t.Errorf("before collect: %s; want the run's change only", s)
	}
	code, out, errOut = clitest.Run(t, home, nil, "collect", id)
	if code != 0 || !strings.Contains(out, "collected "+id) {
		t.Fatalf("collect: exit %d\n%s\n%s", code, out, errOut)
	}
	if s := stat(); !strings.Contains(s, "made.txt") || !strings.Contains(s, "a.txt") {
		t.Errorf("after collect: %s; want both", s)
	}
	clitest.Run(t, home, nil, "exec", id, "--", "rm", "made.txt", "a.txt")
	code, out, errOut = clitest.Run(t, home, nil, "--json", "collect", id)
	var col struct {
		Changes struct {
			Files, Deleted int
		} `json:"changes"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &col) != nil || col.Changes.Files != 1 || col.Changes.Deleted != 1 {
		t.Errorf("collect --json after deleting both: exit %d, %+v\n%s\n%s", code, col, out, errOut)
	}
	if code, out, errOut := clitest.Run(t, home, nil, "apply", id, "--all"); code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(proj, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a.txt after applying its deletion: %v", err)
	}
	if code, _, errOut := clitest.Run(t, home, nil, "collect", id); code == 0 || !strings.Contains(errOut, "applied") {
		t.Errorf("collect after apply: exit %d, %q; want a refusal", code, errOut)
	}
}
