package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

// roundScript changes the project one way in the first round and
// another in a reply round, where it also reads the reply prompt.
const roundScript = `set -e
mkdir -p .airlock
if [ -z "$AIRLOCK_ROUND" ]; then
  echo "version one" > a.txt
  echo "note" > notes.txt
  echo "Round one." > .airlock/summary.md
else
  test "$(cat a.txt)" = "version one"   # the previous round's work is there
  echo "version two" > a.txt
  printf 'Round %s. I read:\n%s' "$AIRLOCK_ROUND" "$AIRLOCK_REPLY" > .airlock/summary.md
fi
`

func fakeBoot(t *testing.T) func(context.Context, Attach) (Machine, error) {
	m := &localMachine{root: t.TempDir()}
	return func(context.Context, Attach) (Machine, error) { return m, nil }
}

// TestReplyRound: a reviewed sandbox sent back with a message, a comment
// and a rejected hunk runs a second round on its own previous result; the
// agent gets all of it in its prompt; the review shows the total against
// the baseline and what the round changed; the first round is kept; the
// result applies.
func TestReplyRound(t *testing.T) {
	s := newStore(t)
	project := newProject(t)
	var out bytes.Buffer
	res, err := Run(context.Background(), s, RunOptions{
		Project: project, Script: []byte(roundScript), ScriptName: "agent.sh", Image: "minimal", Arch: "amd64",
		Boot: fakeBoot(t), Transfer: localTransfer{}, Stdout: &out, Stderr: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	sb := res.Sandbox
	d := review.Decisions{Files: map[string]review.FileDecision{
		"a.txt":     {Verdict: review.Reject, Hunks: map[int]review.HunkDecision{0: {Verdict: review.Reject, Comment: "say two"}}},
		"notes.txt": {Verdict: review.Approve, Comment: "keep this"},
	}}
	if err := sb.SaveDecisions(d); err != nil {
		t.Fatal(err)
	}
	if _, err := Reply(context.Background(), s, sb.ID, "", RunOptions{Boot: fakeBoot(t)}); err == nil {
		t.Error("a reply without a message was accepted")
	}
	res2, err := Reply(context.Background(), s, sb.ID, "Use version two.", RunOptions{Boot: fakeBoot(t), Transfer: localTransfer{}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("reply: %v\n%s", err, out.String())
	}
	if res2.Meta.Round != 2 || res2.Meta.Status != sandbox.StatusReady {
		t.Errorf("after the reply: round %d, status %s", res2.Meta.Round, res2.Meta.Status)
	}
	for _, want := range []string{"Round 2. I read:", "Use version two.", "notes.txt: keep this", "a.txt, hunk 1 (lines 1-1) was rejected: say two"} {
		if !strings.Contains(res2.Summary, want) {
			t.Errorf("the agent's summary lacks %q:\n%s", want, res2.Summary)
		}
	}
	cs, err := sb.Changeset(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f := cs.File("a.txt"); f == nil || string(f.NewContent()) != "version two\n" || cs.File("notes.txt") == nil {
		t.Errorf("the total against the baseline: %+v", cs.Files)
	}
	round, err := sb.RoundChangeset(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(round.Files) != 1 || round.Files[0].Path != "a.txt" || string(round.Files[0].OldContent()) != "version one\n" {
		t.Errorf("what round 2 changed: %+v", round.Files)
	}
	if _, err := os.Stat(filepath.Join(sb.Dir, sandbox.RoundsDir, "1", sandbox.GuestFile)); err != nil {
		t.Errorf("round 1 was not kept: %v", err)
	}
	if _, err := sb.RoundChangeset(context.Background(), 3); err == nil {
		t.Error("a round that does not exist has changes")
	}
	if _, err := sb.Apply(context.Background(), review.ApproveAll(cs)); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "a.txt")); string(got) != "version two\n" {
		t.Errorf("a.txt applied: %q", got)
	}
}
