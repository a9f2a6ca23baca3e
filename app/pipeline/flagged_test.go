package pipeline

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/review"
)

// TestFlaggedPaths: the audit of a collect names the files flagged
// control or bidi characters (and other flags), bounded.
func TestFlaggedPaths(t *testing.T) {
	ctl := review.Flag{Kind: review.FlagControl, Reason: review.ControlReason}
	cs := &review.Changeset{Files: []*review.File{
		{Path: "clean.txt"},
		{Path: "setup.py", Flags: []review.Flag{ctl}},
		{Path: "x\u202e.sh", Flags: []review.Flag{ctl, {Kind: review.FlagHostExec, Reason: "runs on your machine"}}},
	}}
	want := map[review.FlagKind][]string{review.FlagControl: {"setup.py", "x\u202e.sh"}, review.FlagHostExec: {"x\u202e.sh"}}
	if diff := cmp.Diff(want, flaggedPaths(cs)); diff != "" {
		t.Errorf("flagged (-want +got):\n%s", diff)
	}
	if got := flaggedPaths(&review.Changeset{Files: []*review.File{{Path: "a"}}}); len(got) != 0 {
		t.Errorf("nothing flagged: %v", got)
	}
	cs = &review.Changeset{}
	for i := range maxFlaggedAudit + 3 {
		cs.Files = append(cs.Files, &review.File{Path: fmt.Sprint(i), Flags: []review.Flag{ctl}})
	}
	got := flaggedPaths(cs)[review.FlagControl]
	if len(got) != maxFlaggedAudit+1 || got[maxFlaggedAudit] != "… and 3 more" {
		t.Errorf("bounded list ends %q (%d entries)", got[len(got)-1], len(got))
	}
}
