package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
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
			RunSpec: RunSpec{
				Project:    project,
				Script:     []byte(attemptScript),
				ScriptName: "agent.sh",
				Image:      "minimal",
				Arch:       "amd64",
				Sync:       sandbox.SyncCopy,
			},
			Hooks: Hooks{
				Boot:     func(context.Context, Attach) (Machine, error) { return m, nil },
				Transfer: localTransfer{},
			},
		})
	}
	group, attempts, err := fanOut(context.Background(), s, runs, 2)
	if err != nil {
		t.Fatal(err)
	}
	baseSHA := ""
	for i, a := range attempts {
		if a.Err != nil {
			t.Fatalf("attempt %d: %v", i+1, a.Err)
		}
		m := a.Result.Meta
		if m.Group != group || m.Attempt != i+1 || m.Status != sandbox.StatusReady {
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

// TestFanOutPickHunksAcross: two attempts from one baseline change
// different parts of one file, each in two hunks. Taking one hunk from
// the first attempt and then one from the second gives the project both:
// the second apply merges onto the first (same baseline, three-way).
func TestFanOutPickHunksAcross(t *testing.T) {
	s := newStore(t)
	project := t.TempDir()
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	writeTree(t, project, map[string]string{"f.txt": strings.Join(lines, "\n") + "\n"})
	// Attempt 1 edits lines 2 and 30, attempt 2 lines 10 and 20: four
	// hunks far enough apart to stand alone.
	const script = `set -e
if [ "$AIRLOCK_ATTEMPT" = 1 ]; then a=2; b=30; else a=10; b=20; fi
sed -i -e "s/^line $a\$/line $a by attempt $AIRLOCK_ATTEMPT/" -e "s/^line $b\$/line $b by attempt $AIRLOCK_ATTEMPT/" f.txt
`
	var runs []RunOptions
	for range 2 {
		m := &localMachine{root: t.TempDir()}
		runs = append(runs, RunOptions{
			RunSpec: RunSpec{
				Project:    project,
				Script:     []byte(script),
				ScriptName: "agent.sh",
				Image:      "minimal",
				Arch:       "amd64",
				Sync:       sandbox.SyncCopy,
			},
			Hooks: Hooks{
				Boot:     func(context.Context, Attach) (Machine, error) { return m, nil },
				Transfer: localTransfer{},
			},
		})
	}
	_, attempts, err := fanOut(context.Background(), s, runs, 2)
	if err != nil {
		t.Fatal(err)
	}
	// From each attempt, its first hunk only.
	for i, a := range attempts {
		if a.Err != nil {
			t.Fatalf("attempt %d: %v", i+1, a.Err)
		}
		sb := a.Result.Sandbox
		cs, err := sb.Changeset(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		f := cs.File("f.txt")
		if f == nil || len(f.Hunks) != 2 {
			t.Fatalf("attempt %d: f.txt %+v, want two hunks", i+1, f)
		}
		var d review.Decisions
		d.SetHunk("f.txt", 0, review.Approve)
		d.SetHunk("f.txt", 1, review.Reject)
		res, err := sb.Apply(context.Background(), d)
		if err != nil {
			t.Fatalf("apply attempt %d: %v", i+1, err)
		}
		if len(res.Conflicts) > 0 {
			t.Fatalf("apply attempt %d: conflicts %v", i+1, res.Conflicts)
		}
	}
	got, err := os.ReadFile(filepath.Join(project, "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(lines)
	want[2], want[10] = "line 2 by attempt 1", "line 10 by attempt 2"
	if string(got) != strings.Join(want, "\n")+"\n" {
		t.Errorf("project after picking a hunk from each attempt:\n%s", got)
	}
}

func TestCapWriter(t *testing.T) {
	var pass strings.Builder
	c := &capWriter{w: &pass, max: 10}
	c.Write([]byte(`{"a":`))
	c.Write([]byte(`"b"}`))
	if c.over || c.buf.String() != `{"a":"b"}` || pass.String() != `{"a":"b"}` {
		t.Errorf("captured %q, passed %q", c.buf.String(), pass.String())
	}
	c.Write([]byte("more than ten"))
	if !c.over || c.buf.Len() != 0 || pass.Len() != 22 {
		t.Errorf("over %v, kept %d, passed %d", c.over, c.buf.Len(), pass.Len())
	}
}

// TestFinalMessageKept: an agent's final message, read from what it
// printed, is kept with the sandbox and with its round; output past the
// cap gives none.
func TestFinalMessageKept(t *testing.T) {
	s := newStore(t)
	project := newProject(t)
	read := func(b []byte) (string, bool) {
		var v struct{ Result string }
		if json.Unmarshal(b, &v) != nil {
			return "", false
		}
		return v.Result, v.Result != ""
	}
	m := &localMachine{root: t.TempDir()}
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project:    project,
			Script:     []byte(`echo '{"result": "Added stop words."}'`),
			ScriptName: "agent.sh",
			Image:      "minimal",
			Arch:       "amd64",
			Sync:       sandbox.SyncCopy,
		},
		Hooks: Hooks{
			FinalMessage: read,
			Boot:         func(context.Context, Attach) (Machine, error) { return m, nil },
			Transfer:     localTransfer{},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.FinalMessage != "Added stop words." {
		t.Errorf("final message %q", res.FinalMessage)
	}
	if got, err := res.Sandbox.FinalMessage(); err != nil || got != "Added stop words." {
		t.Errorf("kept final message %q, %v", got, err)
	}
}
