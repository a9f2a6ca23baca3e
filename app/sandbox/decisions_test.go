package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

func TestDecisionsRoundTrip(t *testing.T) {
	s := newStore(t)
	sb, err := s.Create(Meta{Project: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := sb.Decisions(ctx)
	if err != nil || len(d.Files) != 0 {
		t.Fatalf("before any save: %+v, %v", d, err)
	}
	want := review.Decisions{Round: 1, Files: map[string]review.FileDecision{
		"a.go": {Verdict: review.Approve, Hunks: map[int]review.HunkDecision{2: {Verdict: review.Reject}},
			Comments: []review.Comment{{Text: "fine"}, {Text: "not this", Start: 3, End: 5, Old: true, Sent: 2}, {Text: "done", Resolved: true}}},
		"b.go": {Verdict: review.Reject},
	}}
	if err := sb.SaveDecisions(want); err != nil {
		t.Fatal(err)
	}
	got, err := sb.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions after a round trip (-want +got):\n%s", diff)
	}
}

// reviewSandbox is a sandbox ready for review whose run turned the
// files of base into those of guest.
func reviewSandbox(t *testing.T, s *Store, base, guest map[string]string) *Sandbox {
	t.Helper()
	project := t.TempDir()
	writeTree(t, project, base)
	for _, content := range base {
		if _, _, err := s.objects.Put(strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
	}
	sb, _ := snapshotSandbox(t, s, project)
	writeGuest(t, sb, guest)
	return sb
}

// writeGuest stores files as the sandbox's guest manifest, their content
// in the store.
func writeGuest(t *testing.T, sb *Sandbox, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	m, _, err := manifest.Walk(context.Background(), dir, manifest.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		if _, _, err := sb.store.objects.Put(strings.NewReader(content)); err != nil {
			t.Fatal(p, err)
		}
	}
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(sb.Path(GuestFile), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func numbered(n int, edit map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if s, ok := edit[i]; ok {
			b.WriteString(s)
			continue
		}
		b.WriteString("line " + strings.Repeat("x", i%3) + "\n")
	}
	return b.String()
}

// TestLegacyReviewMigrates: a review.json saved before comments had
// lines is read with its comments on lines (a hunk's new lines, or its
// old ones when it only removes), written back in the new shape once.
func TestLegacyReviewMigrates(t *testing.T) {
	s := newStore(t)
	base := map[string]string{"a.txt": numbered(30, nil), "b.txt": "keep\ndrop\nkeep\n"}
	sb := reviewSandbox(t, s, base, map[string]string{
		"a.txt": numbered(30, map[int]string{3: "three\n", 25: "twenty-five\nmore\n"}),
		"b.txt": "keep\nkeep\n",
	})
	legacy := `{"files":{"a.txt":{"verdict":"approve","comment":"split it","hunks":{"1":{"verdict":"reject","comment":"not this"}}},` +
		`"b.txt":{"hunks":{"0":{"comment":"keep drop"}}}}}`
	if err := os.WriteFile(sb.Path(ReviewFile), []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := sb.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := review.Decisions{Round: 1, Files: map[string]review.FileDecision{
		"a.txt": {Verdict: review.Approve, Hunks: map[int]review.HunkDecision{1: {Verdict: review.Reject}},
			Comments: []review.Comment{{Text: "split it"}, {Text: "not this", Start: 25, End: 26}}},
		"b.txt": {Comments: []review.Comment{{Text: "keep drop", Start: 2, End: 2, Old: true}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("migrated (-want +got):\n%s", diff)
	}
	raw, err := os.ReadFile(sb.Path(ReviewFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"comment"`) {
		t.Errorf("review.json keeps the old shape: %s", raw)
	}
	again, err := sb.Decisions(ctx)
	if err != nil || !cmp.Equal(want, again) {
		t.Errorf("read again: %+v, %v", again, err)
	}
	// The prompt carries the migrated comments with their lines.
	r, err := sb.PrepareReply(ctx, "Again.")
	if err != nil {
		t.Fatal(err)
	}
	p := r.Prompt
	for _, w := range []string{"### a.txt, the whole file\n> split it", "### a.txt, lines 25-26\n```\n   25  twenty-five\n   26  more\n```\n> not this",
		"### b.txt, removed line 2 (of the version before your changes)\n```\n    2  drop\n```\n> keep drop", "### a.txt, hunk 2"} {
		if !strings.Contains(p, w) {
			t.Errorf("prompt lacks %q:\n%s", w, p)
		}
	}
}

// TestDecisionsNextRound: once a round ran, verdicts of what it changed
// are gone, those of what it left alone stay, comments all stay, and
// the saved review fits the new changeset.
func TestDecisionsNextRound(t *testing.T) {
	s := newStore(t)
	base := map[string]string{"a.txt": numbered(30, nil), "b.txt": "b\n"}
	sb := reviewSandbox(t, s, base, map[string]string{
		"a.txt": numbered(30, map[int]string{3: "three\n", 25: "twenty-five\n"}),
		"b.txt": "b changed\n",
	})
	ctx := context.Background()
	d, err := sb.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.SetHunk("a.txt", 0, review.Approve)
	d.SetHunk("a.txt", 1, review.Reject)
	d.SetFile("b.txt", review.Approve)
	d.AddComment("a.txt", review.Comment{Text: "not 25", Start: 25, End: 25, Sent: 2})
	if err := sb.SaveDecisions(d); err != nil {
		t.Fatal(err)
	}
	// Round 2 rewrites a.txt's second hunk; the first and b.txt stay.
	if err := sb.KeepRound(1); err != nil {
		t.Fatal(err)
	}
	writeGuest(t, sb, map[string]string{"a.txt": numbered(30, map[int]string{3: "three\n", 27: "twenty-seven\n"}), "b.txt": "b changed\n"})
	if _, err := sb.Update(func(m *Meta) { m.Round = 2 }); err != nil {
		t.Fatal(err)
	}
	got, err := sb.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := review.Decisions{Round: 2, Files: map[string]review.FileDecision{
		"a.txt": {Hunks: map[int]review.HunkDecision{0: {Verdict: review.Approve}}, Comments: []review.Comment{{Text: "not 25", Start: 25, End: 25, Sent: 2}}},
		"b.txt": {Verdict: review.Approve},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round 2's review (-want +got):\n%s", diff)
	}
	cs, err := sb.Changeset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Validate(cs); err != nil {
		t.Error(err)
	}
	// A window that loaded round 1's review and saves it now does not
	// take the sent mark back.
	stale := d
	stale.Files = map[string]review.FileDecision{"a.txt": {Comments: []review.Comment{{Text: "not 25", Start: 25, End: 25}}}}
	if err := sb.SaveDecisions(stale); err != nil {
		t.Fatal(err)
	}
	raw, _ := sb.readDecisions()
	if c := raw.Files["a.txt"].Comments; c[0].Sent != 2 {
		t.Errorf("a save took the sent mark back: %+v", c)
	}
}

// TestFreshReviewRejectionNextRound: a review first saved without a
// round (a window that started from an empty review) is on the round
// collected then, so a file it rejected and the next round rewrote is
// undecided again, not silently still rejected.
func TestFreshReviewRejectionNextRound(t *testing.T) {
	s := newStore(t)
	sb := reviewSandbox(t, s, map[string]string{"a.txt": "a\n"}, map[string]string{"a.txt": "a\n", "NOTES.md": "first\n"})
	ctx := context.Background()
	fresh := review.Decisions{Files: map[string]review.FileDecision{}}
	fresh.SetFile("NOTES.md", review.Reject)
	fresh.AddComment("NOTES.md", review.Comment{Text: "too vague"})
	if err := sb.SaveDecisions(fresh); err != nil {
		t.Fatal(err)
	}
	if err := sb.KeepRound(1); err != nil {
		t.Fatal(err)
	}
	writeGuest(t, sb, map[string]string{"a.txt": "a\n", "NOTES.md": "first\nsecond\n"})
	if _, err := sb.Update(func(m *Meta) { m.Round = 2 }); err != nil {
		t.Fatal(err)
	}
	got, err := sb.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fd := got.Files["NOTES.md"]
	if fd.Verdict != review.Undecided || len(fd.Hunks) != 0 {
		t.Errorf("round 2 rewrote NOTES.md, yet its round 1 verdict stays: %+v", fd)
	}
	if len(fd.Comments) != 1 || fd.Comments[0].Text != "too vague" {
		t.Errorf("the comment was not kept: %+v", fd.Comments)
	}
}

func TestRoundLogLegacy(t *testing.T) {
	s := newStore(t)
	sb := reviewSandbox(t, s, map[string]string{"a": "a\n"}, map[string]string{"a": "b\n"})
	if err := os.WriteFile(sb.Path(TranscriptFile), []byte("one\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Round 1 kept by an older Airlock: no transcript of its own.
	if err := os.MkdirAll(filepath.Join(sb.Path(RoundsDir), "1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Update(func(m *Meta) { m.Round = 2 }); err != nil {
		t.Fatal(err)
	}
	l1, err := sb.RoundLog(1)
	if err != nil || l1.Kept {
		t.Errorf("round 1: %+v, %v", l1, err)
	}
	l2, err := sb.RoundLog(2)
	if err != nil || string(l2.Transcript) != "one\ntwo\n" {
		t.Errorf("round 2: %+v, %v", l2, err)
	}
	if _, err := sb.RoundLog(3); err == nil {
		t.Error("round 3 of 2")
	}
}
