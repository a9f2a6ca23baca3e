package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project:    project,
			Script:     []byte(roundScript),
			ScriptName: "agent.sh",
			Image:      "minimal",
			Arch:       "amd64",
			Sync:       sandbox.SyncCopy,
		},
		Hooks: Hooks{
			Boot:     fakeBoot(t),
			Transfer: localTransfer{},
			Stdout:   &out,
			Stderr:   &out,
		},
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
	if _, err := replyRound(context.Background(), s, sb.ID, "", nil, nextRound(t, sb, Hooks{Boot: fakeBoot(t)})); err == nil {
		t.Error("a reply without a message was accepted")
	}
	res2, err := replyRound(context.Background(), s, sb.ID, "Use version two.", nil, nextRound(t, sb, Hooks{Boot: fakeBoot(t), Transfer: localTransfer{}, Stdout: &out, Stderr: &out}))
	if err != nil {
		t.Fatalf("reply: %v\n%s", err, out.String())
	}
	if res2.Meta.Round != 2 || res2.Meta.Status != sandbox.StatusReady {
		t.Errorf("after the reply: round %d, status %s", res2.Meta.Round, res2.Meta.Status)
	}
	for _, want := range []string{"Round 2. I read:", "Use version two.", "### notes.txt, the whole file\n> keep this", "### a.txt, line 1\n```\n    1  version one\n```\n> say two", "### a.txt (modified): the whole change to this file"} {
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

// roundsScript writes a.txt anew each round and tells, in its summary,
// what it read; it prints which round ran.
const roundsScript = `set -e
mkdir -p .airlock
printf 'version %s\nsecond\nthird\n' "${AIRLOCK_ROUND:-1}" > a.txt
printf 'Round %s. I read:\n%s' "${AIRLOCK_ROUND:-1}" "$AIRLOCK_REPLY" > .airlock/summary.md
echo "round ${AIRLOCK_ROUND:-1} ran"
`

// roundsSandbox is a sandbox of roundsScript's first round, ready for a
// reply, its output in out.
func roundsSandbox(t *testing.T, s *sandbox.Store, out *bytes.Buffer) *sandbox.Sandbox {
	t.Helper()
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project:    newProject(t),
			Script:     []byte(roundsScript),
			ScriptName: "agent.sh",
			Image:      "minimal",
			Arch:       "amd64",
			Sync:       sandbox.SyncCopy,
		},
		Hooks: Hooks{
			Boot:     fakeBoot(t),
			Transfer: localTransfer{},
			Stdout:   out,
			Stderr:   out,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Sandbox
}

// TestReplySendsEachCommentOnce: two send backs; each comment goes with
// the first reply after it was written and never again, a resolved one
// never; each is marked with the round it started; each round's
// transcript and prompt are kept apart.
func TestReplySendsEachCommentOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var out bytes.Buffer
	sb := roundsSandbox(t, s, &out)
	comment := func(text string, line int) review.Comment { return review.Comment{Text: text, Start: line, End: line} }
	d, err := sb.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.AddComment("a.txt", comment("say two", 1))
	never := comment("never send me", 2)
	never.Resolved = true
	d.AddComment("a.txt", never)
	d.SetHunk("a.txt", 0, review.Reject)
	if err := sb.SaveDecisions(d); err != nil {
		t.Fatal(err)
	}

	reply := func(message string) string {
		t.Helper()
		res, err := replyRound(ctx, s, sb.ID, message, nil, nextRound(t, sb, Hooks{Boot: fakeBoot(t), Transfer: localTransfer{}, Stdout: &out, Stderr: &out}))
		if err != nil {
			t.Fatalf("reply: %v\n%s", err, out.String())
		}
		return res.Summary
	}
	sentOf := func(text string) int {
		t.Helper()
		d, err := sb.Decisions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Files["a.txt"].Comments {
			if c.Text == text {
				return c.Sent
			}
		}
		t.Fatalf("no comment %q in %+v", text, d)
		return 0
	}

	got := reply("Round two, please.")
	for _, want := range []string{"Round 2. I read:", "Round two, please.", "### a.txt, line 1\n```\n    1  version 1\n```\n> say two\n", "hunk 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("round 2's prompt lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "never send me") {
		t.Errorf("round 2's prompt has the resolved comment:\n%s", got)
	}
	if n := sentOf("say two"); n != 2 {
		t.Errorf("the round 1 comment shows Sent=%d, want 2", n)
	}
	if n := sentOf("never send me"); n != 0 {
		t.Errorf("the resolved comment shows Sent=%d", n)
	}

	d, err = sb.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Round != 2 || len(d.Files["a.txt"].Hunks) != 0 {
		t.Errorf("round 1's verdict on a hunk round 2 rewrote was carried: %+v", d)
	}
	d.AddComment("a.txt", comment("now three", 1))
	if err := sb.SaveDecisions(d); err != nil {
		t.Fatal(err)
	}
	got = reply("Round three.")
	if !strings.Contains(got, "    1  version 2\n```\n> now three\n") {
		t.Errorf("round 3's prompt lacks the new comment:\n%s", got)
	}
	for _, old := range []string{"say two", "never send me"} {
		if strings.Contains(got, old) {
			t.Errorf("round 3's prompt sends %q again:\n%s", old, got)
		}
	}
	if a, b := sentOf("say two"), sentOf("now three"); a != 2 || b != 3 {
		t.Errorf("sent in rounds %d and %d, want 2 and 3", a, b)
	}

	for n := 1; n <= 3; n++ {
		l, err := sb.RoundLog(n)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("round %d ran", n)
		if tr := string(l.Transcript); !l.Kept || strings.Count(tr, " ran") != 1 || !strings.Contains(tr, want) {
			t.Errorf("round %d's transcript: %q", n, tr)
		}
		if (n == 1) != (l.Prompt == "") {
			t.Errorf("round %d's prompt: %q", n, l.Prompt)
		}
	}
	if l, _ := sb.RoundLog(2); !strings.Contains(l.Prompt, "say two") {
		t.Errorf("round 2's kept prompt: %q", l.Prompt)
	}
}

// TestReplyFailedBeforeTheAgentKeepsComments: a reply whose VM never
// booted did not send its comments; they wait for the next reply.
func TestReplyFailedBeforeTheAgentKeepsComments(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	var out bytes.Buffer
	sb := roundsSandbox(t, s, &out)
	var d review.Decisions
	d.AddComment("a.txt", review.Comment{Text: "say two", Start: 1, End: 1})
	if err := sb.SaveDecisions(d); err != nil {
		t.Fatal(err)
	}
	noBoot := func(context.Context, Attach) (Machine, error) { return nil, errors.New("no machine today") }
	if _, err := replyRound(ctx, s, sb.ID, "Again.", nil, nextRound(t, sb, Hooks{Boot: noBoot, Transfer: localTransfer{}, Stdout: &out, Stderr: &out})); err == nil {
		t.Fatal("a reply without a machine succeeded")
	}
	d, err := sb.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Files["a.txt"].Comments; len(c) != 1 || c[0].Sent != 0 {
		t.Errorf("after a reply that never ran: %+v", c)
	}
}

// nextRound is sandbox sb's next round as the planner plans it (app/plan
// decides it; the pipeline only carries it out): the same project,
// command or script, sync mode and verify, with hooks.
func nextRound(t *testing.T, sb *sandbox.Sandbox, hooks Hooks) RunOptions {
	t.Helper()
	m, err := sb.Meta()
	if err != nil {
		t.Fatal(err)
	}
	o := RunOptions{RunSpec: RunSpec{Project: m.Project, Command: m.Command, Image: m.Image, Arch: m.Arch, Agent: m.Agent, Sync: sandbox.SyncCopy}, Hooks: hooks}
	if m.ScriptName != "" {
		if o.Script, err = os.ReadFile(sb.Path(sandbox.ScriptFile)); err != nil {
			t.Fatal(err)
		}
		o.ScriptName = m.ScriptName
	}
	if m.Verify != nil {
		o.Verify = m.Verify.Command
	}
	return o
}
