package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/testkit/testenv"
)

func TestCheckpointCommandsHelp(t *testing.T) {
	for _, args := range [][]string{{"checkpoint", "--help"}, {"rollback", "--help"}, {"checkpoints", "--help"}, {"exec", "--help"}} {
		code, out, _ := airlockCLI(t, t.TempDir(), args...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}

func TestKeepRefusesVirtiofs(t *testing.T) {
	home := t.TempDir()
	code, _, errOut := airlockCLI(t, home, "run", "--keep", "--sync", "virtiofs", "--project", t.TempDir(), "--", "true")
	if code == 0 || !strings.Contains(errOut, "virtio-fs") {
		t.Errorf("run --keep --sync virtiofs: exit %d, %q; want a refusal naming virtio-fs", code, errOut)
	}
}

// TestCheckpointRollback keeps a sandbox's VM, starts a background
// process, checkpoints, changes files and kills the process, rolls back,
// and finds the files and the process as they were.
func TestCheckpointRollback(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "a.txt"), []byte("v0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := airlockCLI(t, home, "--json", "run", "--keep", "--project", proj, "--", "sh", "-c", "echo v1 > a.txt")
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
	t.Cleanup(func() { airlockCLI(t, home, "stop", "--kill", id) })
	sh := shellIn(t, home, id)
	if got := sh("cat a.txt; pwd"); got != "v1\n/workspace" {
		t.Fatalf("kept VM: %q, want the run's file in /workspace", got)
	}
	sh("setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > /tmp/sleep.pid")
	pid := sh("cat /tmp/sleep.pid")
	if got := sh("kill -0 $(cat /tmp/sleep.pid) && echo alive"); got != "alive" {
		t.Fatalf("background sleep %s: %q", pid, got)
	}

	code, out, errOut = airlockCLI(t, home, "checkpoint", id, "before")
	if code != 0 {
		t.Fatalf("checkpoint: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("%s", strings.TrimSpace(out))
	if code, _, errOut := airlockCLI(t, home, "checkpoint", id, "before"); code == 0 || !strings.Contains(errOut, "exists") {
		t.Errorf("a second checkpoint of the same name: exit %d, %q", code, errOut)
	}

	// Change everything, kill the process.
	sh("kill $(cat /tmp/sleep.pid); echo v2 > a.txt; echo new > b.txt")
	if got := sh("kill -0 $(cat /tmp/sleep.pid) 2>/dev/null && echo alive; cat a.txt b.txt"); got != "v2\nnew" {
		t.Fatalf("after the changes: %q", got)
	}

	code, out, errOut = airlockCLI(t, home, "rollback", id, "before")
	if code != 0 {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("%s", strings.TrimSpace(out))
	if got := sh("cat a.txt; ls; kill -0 $(cat /tmp/sleep.pid) && echo alive; tr '\\0' ' ' < /proc/$(cat /tmp/sleep.pid)/cmdline"); got != "v1\na.txt\nalive\nsleep 1000" {
		t.Errorf("after the rollback: %q, want a.txt back at v1, no b.txt, sleep %s alive", got, pid)
	}

	// Listed, and audited.
	code, out, _ = airlockCLI(t, home, "--json", "checkpoints", id)
	var cps []struct {
		Name       string `json:"name"`
		StateBytes int64  `json:"state_bytes"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &cps) != nil || len(cps) != 1 || cps[0].Name != "before" || cps[0].StateBytes == 0 {
		t.Errorf("checkpoints --json: exit %d, %s", code, out)
	}
	code, out, _ = airlockCLI(t, home, "--json", "ls")
	var rows []struct {
		ID          string `json:"id"`
		VM          string `json:"vm"`
		Checkpoints int    `json:"checkpoints"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Checkpoints != 1 || rows[0].VM != "running" {
		t.Errorf("ls --json: exit %d, %s", code, out)
	}
	audit, err := os.ReadFile(filepath.Join(home, "sandboxes", id, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{`"event":"checkpoint"`, `"event":"rollback"`} {
		if !strings.Contains(string(audit), ev) {
			t.Errorf("audit log has no %s", ev)
		}
	}
}

// TestExecWarmAndCold: exec restores the image's warm snapshot once one is
// saved, and --cold boots cold.
func TestExecWarmAndCold(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	exec := func(args ...string) bool {
		t.Helper()
		code, out, errOut := airlockCLI(t, home, append([]string{"--json", "exec"}, append(args, "--", "cat", "/proc/sys/kernel/random/uuid")...)...)
		var res struct {
			Warm   bool   `json:"warm"`
			BootMS int64  `json:"boot_ms"`
			Stdout string `json:"stdout"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(strings.TrimSpace(res.Stdout)) != 36 {
			t.Fatalf("exec %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		t.Logf("exec %v: warm %v, boot %d ms", args, res.Warm, res.BootMS)
		return res.Warm
	}
	exec() // saves the snapshot if there is none yet
	if !exec() {
		t.Error("exec after a snapshot was saved booted cold")
	}
	if exec("--cold") {
		t.Error("exec --cold restored the warm snapshot")
	}
}

// shellIn runs shell scripts in the kept VM of sandbox id (airlock exec
// ID) and returns their output, trimmed; a failure ends the test.
func shellIn(t *testing.T, home, id string) func(script string) string {
	return func(script string) string {
		t.Helper()
		code, out, errOut := airlockCLI(t, home, "exec", id, "--", "sh", "-c", script)
		if code != 0 {
			t.Fatalf("exec %s %q: exit %d\n%s\n%s", id, script, code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
}
