package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/review"
)

// attemptScript edits the project differently in each attempt.
const attemptScript = `set -e
echo "attempt $AIRLOCK_ATTEMPT" > result.txt
i=0; while [ $i -lt "$AIRLOCK_ATTEMPT" ]; do echo "line $i" >> b.txt; i=$((i+1)); done
mkdir -p .airlock
printf '# Attempt %s of group %s\n\nMore.\n' "$AIRLOCK_ATTEMPT" "$AIRLOCK_GROUP" > .airlock/summary.md
`

// TestFanOut: three attempts from one baseline are three independent
// sandboxes, each reviewable and applicable on its own, and Compare shows
// them side by side by group.
func TestFanOut(t *testing.T) {
	s := newStore(t)
	project := newProject(t)
	var runs []RunOptions
	for range 3 {
		m := &localMachine{root: t.TempDir()}
		runs = append(runs, RunOptions{
			Project: project, Script: []byte(attemptScript), ScriptName: "agent.sh",
			Image: "minimal", Arch: "amd64",
			Boot:     func(context.Context, Attach) (Machine, error) { return m, nil },
			Transfer: localTransfer{},
		})
	}
	group, attempts, err := s.FanOut(context.Background(), runs, 2)
	if err != nil {
		t.Fatal(err)
	}
	baseSHA := ""
	for i, a := range attempts {
		if a.Err != nil {
			t.Fatalf("attempt %d: %v", i+1, a.Err)
		}
		m := a.Result.Meta
		if m.Group != group || m.Attempt != i+1 || m.Status != StatusReady {
			t.Errorf("attempt %d: group %q attempt %d status %s", i+1, m.Group, m.Attempt, m.Status)
		}
		if baseSHA == "" {
			baseSHA = m.BaselineSHA256
		} else if m.BaselineSHA256 != baseSHA {
			t.Errorf("attempt %d has another baseline", i+1)
		}
		cs, err := a.Result.Sandbox.Changeset(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		res := cs.File("result.txt")
		if res == nil || string(res.NewContent()) != fmt.Sprintf("attempt %d\n", i+1) {
			t.Errorf("attempt %d: result.txt %+v", i+1, res)
		}
		if m.Changes == nil || m.Changes.LinesAdded != 1+i+1 {
			t.Errorf("attempt %d: changes %+v, want %d lines added", i+1, m.Changes, i+2)
		}
	}

	cmp, err := s.Compare([]string{group})
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp) != 3 {
		t.Fatalf("compare of the group: %d sandboxes", len(cmp))
	}
	for i, c := range cmp {
		if c.Attempt != i+1 || c.ID != attempts[i].Result.Meta.ID {
			t.Errorf("compare row %d: %+v", i, c)
		}
		if want := fmt.Sprintf("Attempt %d of group %s", i+1, group); c.Rationale != want {
			t.Errorf("rationale %q, want %q", c.Rationale, want)
		}
	}
	// One ID names one sandbox.
	if one, err := s.Compare([]string{cmp[1].ID}); err != nil || len(one) != 1 || one[0].Attempt != 2 {
		t.Errorf("compare of one ID: %+v, %v", one, err)
	}

	// Picking one attempt: apply it; the project gets that attempt's result.
	sb := attempts[1].Result.Sandbox
	cs, _ := sb.Changeset(context.Background())
	if _, err := sb.Apply(context.Background(), review.ApproveAll(cs)); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "result.txt")); string(got) != "attempt 2\n" {
		t.Errorf("applied result.txt = %q", got)
	}
}
