package review

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFeedback(t *testing.T) {
	fx := newFixture(t, richOld, richNew, nil)
	var d Decisions
	if fb := d.Feedback(fx.cs); !fb.Empty() || fb.Text() != "" || fb.Summary() != "" {
		t.Errorf("feedback without comments: %+v %q", fb, fb.Text())
	}
	d.SetFile("a.txt", Approve)
	d.SetHunk("a.txt", 1, Reject)
	d.AddComment("a.txt", Comment{Text: "why 25b?\nsay it", Start: 24, End: 25})
	d.AddComment("a.txt", Comment{Text: "said before", Start: 3, End: 3, Sent: 2})
	d.AddComment("a.txt", Comment{Text: "done with", Start: 5, End: 5, Resolved: true})
	d.AddComment("removed.txt", Comment{Text: "keep soon", Start: 2, End: 2, Old: true})
	d.AddComment("noeol.txt", Comment{Text: "why z?"})
	d.SetFile("mode.sh", Reject)
	fb := d.Feedback(fx.cs)
	if got, want := fb.Summary(), "3 comments, 1 rejected hunk and 1 rejected file"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	got := fb.Text()
	for _, want := range []string{
		"### a.txt, lines 24-25\n```\n   24  line 25\n   25  line 25b\n```\n> why 25b?\n> say it\n",
		"### removed.txt, removed line 2 (of the version before your changes)\n```\n    2  soon\n```\n> keep soon\n",
		"### noeol.txt, the whole file\n> why z?\n",
		"### a.txt, hunk 2 (line 25 of your version)\n```diff\n",
		"+line 25b\n",
		"### mode.sh (mode-changed): the whole change to this file\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("feedback lacks %q:\n%s", want, got)
		}
	}
	for _, never := range []string{"said before", "done with"} {
		if strings.Contains(got, never) {
			t.Errorf("feedback sends %q again:\n%s", never, got)
		}
	}
}

func TestMarkSentAndKeepSent(t *testing.T) {
	fx := newFixture(t, richOld, richNew, nil)
	var d Decisions
	d.AddComment("a.txt", Comment{Text: "one", Start: 3, End: 3})
	d.AddComment("a.txt", Comment{Text: "two", Start: 25, End: 25})
	fb := d.Feedback(fx.cs)
	// Between the prompt and the mark, the reviewer resolved "two" and
	// wrote "three".
	stored := d
	stored.Files = map[string]FileDecision{"a.txt": {Comments: []Comment{{Text: "one", Start: 3, End: 3}, {Text: "two", Start: 25, End: 25, Resolved: true}, {Text: "three"}}}}
	if n := stored.MarkSent(2, fb.Comments); n != 1 {
		t.Errorf("marked %d, want 1", n)
	}
	want := []Comment{{Text: "one", Start: 3, End: 3, Sent: 2}, {Text: "two", Start: 25, End: 25, Resolved: true}, {Text: "three"}}
	if diff := cmp.Diff(want, stored.Files["a.txt"].Comments); diff != "" {
		t.Errorf("after MarkSent (-want +got):\n%s", diff)
	}
	// A window that loaded the review before the reply saves it again.
	stale := Decisions{Files: map[string]FileDecision{"a.txt": {Comments: []Comment{{Text: "one", Start: 3, End: 3}, {Text: "four"}}}}}
	stale.KeepSent(stored)
	if got := stale.Files["a.txt"].Comments; got[0].Sent != 2 || got[1].Sent != 0 {
		t.Errorf("after KeepSent: %+v", got)
	}
}

func TestMigrateLegacy(t *testing.T) {
	fx := newFixture(t, richOld, richNew, nil)
	d := Decisions{Files: map[string]FileDecision{
		"a.txt": {Verdict: Approve, Comment: "split it", Hunks: map[int]HunkDecision{
			0: {Comment: "why three?"}, 1: {Verdict: Reject, Comment: "no 25b"}, 7: {Comment: "gone hunk"}}},
		"removed.txt": {Hunks: map[int]HunkDecision{0: {Comment: "keep it"}}},
	}}
	if !d.MigrateLegacy(fx.cs) {
		t.Fatal("nothing migrated")
	}
	want := Decisions{Files: map[string]FileDecision{
		"a.txt": {Verdict: Approve, Hunks: map[int]HunkDecision{1: {Verdict: Reject}}, Comments: []Comment{
			{Text: "split it"},
			{Text: "why three?", Start: 3, End: 3},
			{Text: "no 25b", Start: 25, End: 25},
			{Text: "gone hunk"},
		}},
		"removed.txt": {Comments: []Comment{{Text: "keep it", Start: 1, End: 2, Old: true}}},
	}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("migrated (-want +got):\n%s", diff)
	}
	if d.MigrateLegacy(fx.cs) {
		t.Error("a second migration changed something")
	}
	// A window on the old shape saves a comment that was migrated and
	// sent since: it stays one comment, sent.
	fd := d.Files["a.txt"]
	fd.Comments[1].Sent = 2
	fd.Hunks[0] = HunkDecision{Comment: "why three?"}
	d.Files["a.txt"] = fd
	d.MigrateLegacy(fx.cs)
	if c := d.Files["a.txt"].Comments; len(c) != 4 || c[1].Sent != 2 {
		t.Errorf("a comment migrated again: %+v", c)
	}
}

// TestCarryVerdicts: a new round keeps the verdicts of what it left
// alone and of hunks it left identical, never puts an old hunk's verdict
// on a new hunk, and keeps every comment.
func TestCarryVerdicts(t *testing.T) {
	prev := newFixture(t, richOld, richNew, nil).cs
	next := richNew
	next.files = map[string]string{}
	for k, v := range richNew.files {
		next.files[k] = v
	}
	// Round 2 rewrote a.txt's second hunk and gave up noeol.txt.
	next.files["a.txt"] = numbered(30, map[int]string{3: "line three\n", 4: "", 25: "line 25 again\n"})
	next.files["noeol.txt"] = richOld.files["noeol.txt"]
	cur := newFixture(t, richOld, next, nil).cs

	var d Decisions
	d.Round = 1
	d.SetFile("a.txt", Approve)
	d.SetHunk("a.txt", 1, Reject)
	d.AddComment("a.txt", Comment{Text: "no 25b", Start: 25, End: 26, Sent: 2})
	d.SetFile("crlf.txt", Reject)
	d.SetFile("noeol.txt", Reject)
	d.AddComment("noeol.txt", Comment{Text: "leave it", Sent: 2})
	got := d.CarryVerdicts(prev, cur)
	want := Decisions{Round: 1, Files: map[string]FileDecision{
		// Hunk 1 is the same change: its verdict (the file's) stays; the
		// new hunk 2 is undecided.
		"a.txt":     {Hunks: map[int]HunkDecision{0: {Verdict: Approve}}, Comments: []Comment{{Text: "no 25b", Start: 25, End: 26, Sent: 2}}},
		"crlf.txt":  {Verdict: Reject},
		"noeol.txt": {Comments: []Comment{{Text: "leave it", Sent: 2}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("carried (-want +got):\n%s", diff)
	}
	if err := got.Validate(cur); err != nil {
		t.Errorf("carried decisions do not fit the new round: %v", err)
	}
	if got := d.CarryVerdicts(nil, cur); len(got.Files["crlf.txt"].Hunks)+len(got.Files["crlf.txt"].Verdict) != 0 {
		t.Errorf("without the earlier changeset a verdict stayed: %+v", got)
	}
}
