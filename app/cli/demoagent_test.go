package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// TestDemoAgentLoop runs the whole loop with the demo preset in a real
// VM: the stand-in agent in the image asks the fake model on the host's
// loopback through the egress proxy (the only way out), edits the
// workspace and writes its summary; the user reviews (a comment, a
// rejected hunk), replies, the agent continues on its own result, the
// second round is reviewed and applied.
func TestDemoAgentLoop(t *testing.T) {
	testenv.SkipIfShort(t)
	demoAgentLoop(t, testenv.VMHome(t), "--disk", "none")
}

// demoAgentLoop runs the demo agent's loop in home (run with runFlags,
// review, reply, diff of round 2, apply) and returns the sandbox and the
// output of its reply.
func demoAgentLoop(t *testing.T, home string, runFlags ...string) (sb *sandbox.Sandbox, replyOut string) {
	t.Helper()
	project := t.TempDir()
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)

	args := append([]string{"run", "--arch", "amd64"}, runFlags...)
	args = append(args, "--project", project, "--agent", "demo", "--prompt", "Add stop words to the counter")
	code, out, errOut := airlockCLI(t, home, args...)
	if code != 0 {
		t.Fatalf("run --agent demo: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"demo-agent: wrote NOTES.md", `Wrote a plan for "Add stop words to the counter"`} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("run output lacks %q:\n%s%s", want, out, errOut)
		}
	}
	if !strings.Contains(errOut, "net: ") || !strings.Contains(errOut, "POST") {
		t.Errorf("the model request did not go through the proxy (no net: line):\n%s", errOut)
	}
	st, _ := sandbox.Open(home)
	list, _ := st.List()
	sb, _ = st.Get(list[0].ID)
	cs, err := sb.Changeset(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	notes := cs.File("NOTES.md")
	if notes == nil || !strings.Contains(string(notes.NewContent()), "Task: Add stop words to the counter") {
		t.Fatalf("first round: %+v", cs.Files)
	}
	if err := sb.SaveDecisions(review.Decisions{Files: map[string]review.FileDecision{
		"NOTES.md": {Verdict: review.Reject, Comment: "too vague", Hunks: map[int]review.HunkDecision{0: {Verdict: review.Reject, Comment: "name the stop words"}}},
	}}); err != nil {
		t.Fatal(err)
	}

	code, out, errOut = airlockCLI(t, home, "reply", sb.ID, "--message", "List the stop words: a, an, the.")
	if code != 0 || !strings.Contains(out+errOut, "Took the review into account") {
		t.Fatalf("reply: exit %d\n%s%s", code, out, errOut)
	}
	replyOut = out + errOut
	cs, _ = sb.Changeset(t.Context())
	body := string(cs.File("NOTES.md").NewContent())
	for _, want := range []string{"Task: Add stop words", "## After review", "List the stop words: a, an, the.", "### NOTES.md, the whole file\n> too vague", "> name the stop words", "### NOTES.md (added): the whole change to this file"} {
		if !strings.Contains(body, want) {
			t.Errorf("NOTES.md after the reply lacks %q:\n%s", want, body)
		}
	}
	code, diff, _ := airlockCLI(t, home, "diff", sb.ID, "--round", "2")
	if code != 0 || !strings.Contains(diff, "+## After review") || strings.Contains(diff, "+# Plan") {
		t.Errorf("diff --round 2: exit %d\n%s", code, diff)
	}
	if code, out, errOut := airlockCLI(t, home, "apply", sb.ID, "--all"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "NOTES.md")); string(got) != body {
		t.Errorf("NOTES.md applied:\n%s", got)
	}
	return sb, replyOut
}
