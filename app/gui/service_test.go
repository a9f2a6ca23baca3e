package gui

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

// TestStoreService checks the adapter over a real store: each method
// reaches app/sandbox.
func TestStoreService(t *testing.T) {
	store, err := sandbox.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc := &StoreService{Store: store}
	sb, err := store.Create(sandbox.Meta{Project: t.TempDir(), Status: sandbox.StatusReady})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := svc.List()
	if err != nil || len(infos) != 1 || infos[0].ID != sb.ID {
		t.Fatalf("List = %+v, %v", infos, err)
	}
	if _, err := svc.Changeset(context.Background(), sb.ID); !errors.Is(err, sandbox.ErrNotReady) {
		t.Errorf("Changeset of a sandbox that never ran: %v, want ErrNotReady", err)
	}
	if _, err := svc.Undo(context.Background(), sb.ID); !errors.Is(err, sandbox.ErrNothingToUndo) {
		t.Errorf("Undo with no apply: %v, want ErrNothingToUndo", err)
	}
	d := review.Decisions{Files: map[string]review.FileDecision{"a": {Verdict: review.Approve, Comment: "ok"}}}
	if err := svc.SaveDecisions(sb.ID[:4], d); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Decisions(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The old shape of a comment is read as a comment on the file.
	want := review.Decisions{Round: 1, Files: map[string]review.FileDecision{"a": {Verdict: review.Approve, Comments: []review.Comment{{Text: "ok"}}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	// Promotion reaches the same functions airlock apply --commit and
	// --branch call: a project outside git is refused before anything.
	if msg, err := svc.CommitMessage(sb.ID); err != nil || msg != "Changes from Airlock sandbox "+sb.ID {
		t.Errorf("CommitMessage = %q, %v", msg, err)
	}
	if _, _, err := svc.ApplyCommit(context.Background(), sb.ID, d, sandbox.ApplyOptions{AllOrNothing: true}, promote.CommitOptions{}); !errors.Is(err, promote.ErrNotGitRepo) {
		t.Errorf("ApplyCommit outside git: %v, want ErrNotGitRepo", err)
	}
	if _, err := svc.Branch(context.Background(), sb.ID, d, promote.CommitOptions{Branch: "agent/x"}); !errors.Is(err, promote.ErrNotGitRepo) {
		t.Errorf("Branch outside git: %v, want ErrNotGitRepo", err)
	}
	if _, err := svc.Run(context.Background(), RunRequest{Project: t.TempDir(), Command: []string{"true"}}); err == nil {
		t.Error("Run with no boot function succeeded")
	}
}
