package sandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/review"
)

func TestDecisionsRoundTrip(t *testing.T) {
	s := newStore(t)
	sb, err := s.Create(Meta{Project: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := sb.Decisions()
	if err != nil || len(d.Files) != 0 {
		t.Fatalf("before any save: %+v, %v", d, err)
	}
	want := review.Decisions{Files: map[string]review.FileDecision{
		"a.go": {Verdict: review.Approve, Comment: "fine", Hunks: map[int]review.HunkDecision{2: {Verdict: review.Reject, Comment: "not this"}}},
		"b.go": {Verdict: review.Reject},
	}}
	if err := sb.SaveDecisions(want); err != nil {
		t.Fatal(err)
	}
	got, err := sb.Decisions()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions after a round trip (-want +got):\n%s", diff)
	}
}
