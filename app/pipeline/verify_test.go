package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
)

func runVerify(t *testing.T, s *sandbox.Store, project, verify string) *RunResult {
	t.Helper()
	m := &localMachine{root: t.TempDir()}
	var out bytes.Buffer
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project:    project,
			Script:     []byte(agentScript),
			ScriptName: "agent.sh",
			Image:      "minimal",
			Arch:       "amd64",
			Verify:     verify,
			Sync:       sandbox.SyncCopy,
		},
		Hooks: Hooks{
			Boot:     func(context.Context, Attach) (Machine, error) { return m, nil },
			Transfer: localTransfer{},
			Stdout:   &out,
			Stderr:   &out,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestVerify: the verify command runs in /workspace after the agent, on
// its result; its output and exit status are recorded and audited; what
// it leaves behind is not part of the changes; a failing verify is a
// result, not a failed run; a plan without a verify step runs none,
// whatever airlock.toml says (the planner read it).
func TestVerify(t *testing.T) {
	s := newStore(t)
	project := newProject(t)

	res := runVerify(t, s, project, `grep -q "first line" a.txt && echo checked > artifact.txt && echo verify-ok`)
	v := res.Meta.Verify
	if v == nil || !v.Passed || v.ExitCode != 0 || v.String() != "passed" {
		t.Fatalf("verify result %+v", v)
	}
	log, _ := res.Sandbox.VerifyLog()
	if !strings.Contains(string(log), "verify-ok") {
		t.Errorf("verify.log: %q", log)
	}
	cs, err := res.Sandbox.Changeset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cs.File("artifact.txt") != nil {
		t.Error("what the verify command wrote is part of the agent's changes")
	}
	events, _ := res.Sandbox.ReadAudit()
	found := false
	for _, ev := range events {
		if d, ok := ev.Data.(map[string]any); ok && ev.Event == sandbox.EventVerified && d["passed"] == true {
			found = true
		}
	}
	if !found {
		t.Error("no verified event in the audit log")
	}

	res = runVerify(t, s, project, "echo broken >&2; exit 3")
	if v := res.Meta.Verify; v == nil || v.Passed || v.ExitCode != 3 || v.String() != "FAILED (exit 3)" || res.Meta.Status != sandbox.StatusReady {
		t.Errorf("failing verify: %+v, status %s", v, res.Meta.Status)
	}

	// The plan decides the verify step (app/plan reads airlock.toml):
	// the pipeline runs none when the plan has none, whatever the
	// project's file says.
	os.WriteFile(filepath.Join(project, "airlock.toml"), []byte(`verify = "echo from-toml"`+"\n"), 0o644)
	if res = runVerify(t, s, project, ""); res.Meta.Verify != nil {
		t.Errorf("the pipeline decided a verify step the plan did not have: %+v", res.Meta.Verify)
	}
}
