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

// TestReplyInVM: run, review (a rejected hunk with a comment), reply with
// a message, a second round in a fresh VM on the first round's result
// that sees the whole prompt, diff of the round, verify again, apply.
func TestReplyInVM(t *testing.T) {
	testenv.SkipIfShort(t)
	home := testenv.VMHome(t)
	project := t.TempDir()
	copyTree(t, filepath.Join(testenv.RepoRoot(t), "examples", "demo-project"), project)
	script := filepath.Join(t.TempDir(), "agent.sh")
	os.WriteFile(script, []byte(`set -e
mkdir -p .airlock
if [ -z "$AIRLOCK_ROUND" ]; then
  echo "first try" > ANSWER.txt
  echo "Round one." > .airlock/summary.md
else
  test "$(cat ANSWER.txt)" = "first try"
  echo "second try" > ANSWER.txt
  printf 'Round %s, told:\n%s\n' "$AIRLOCK_ROUND" "$AIRLOCK_REPLY" > .airlock/summary.md
fi
echo "round ${AIRLOCK_ROUND:-1} done"
`), 0o644)
	code, out, errOut := airlockCLI(t, home, "run", "--arch", "amd64", "--disk", "none", "--project", project, "--script", script,
		"--verify", "grep -q try ANSWER.txt")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	st, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := st.List()
	sb, _ := st.Get(list[0].ID)
	if err := sb.SaveDecisions(review.Decisions{Files: map[string]review.FileDecision{
		"ANSWER.txt": {Verdict: review.Reject, Hunks: map[int]review.HunkDecision{0: {Verdict: review.Reject, Comment: "not this"}}},
	}}); err != nil {
		t.Fatal(err)
	}

	code, out, errOut = airlockCLI(t, home, "reply", sb.ID, "--message", "Try again.")
	if code != 0 || !strings.Contains(out, "round 2 done") || !strings.Contains(out, "verify grep -q try ANSWER.txt: passed") {
		t.Fatalf("reply: exit %d\n%s%s", code, out, errOut)
	}
	// The summary is printed indented by two spaces.
	summary := strings.ReplaceAll(out, "\n  ", "\n")
	for _, want := range []string{"Round 2, told:", "Try again.", "### ANSWER.txt, line 1\n```\n    1  first try\n```\n> not this", "### ANSWER.txt (added): the whole change to this file"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the second round's summary lacks %q:\n%s", want, out)
		}
	}
	code, diff, _ := airlockCLI(t, home, "diff", sb.ID, "--round", "2")
	if code != 0 || !strings.Contains(diff, "-first try") || !strings.Contains(diff, "+second try") {
		t.Errorf("diff --round 2: exit %d\n%s", code, diff)
	}
	code, diff, _ = airlockCLI(t, home, "diff", sb.ID)
	if code != 0 || strings.Contains(diff, "first try") || !strings.Contains(diff, "+second try") {
		t.Errorf("diff after the reply: exit %d\n%s", code, diff)
	}
	if code, out, errOut := airlockCLI(t, home, "apply", sb.ID, "--all"); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "ANSWER.txt")); string(got) != "second try\n" {
		t.Errorf("ANSWER.txt applied: %q", got)
	}
}
