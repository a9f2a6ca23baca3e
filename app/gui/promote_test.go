package gui

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

// flaggedService is the review service over flaggedChangeset.
func flaggedService(t *testing.T) *fakeService {
	svc := reviewService(t)
	svc.changesets["1a2b3c4d"] = flaggedChangeset(t)
	return svc
}

// The overview of what deserves a second look heads the review, under
// the verify line, whole in its tooltip; a review with no flag has none.
func TestSecondLookOverview(t *testing.T) {
	r := newTestReview(t, flaggedService(t))
	line, tip := secondLookText(r.m.cs)
	for _, want := range []string{"4 files deserve a second look: ", "1 dependency change (added: left-pad)", "1 test skipped", "1 possible credential", "1 file that runs on your machine"} {
		if !strings.Contains(line, want) {
			t.Errorf("overview %q lacks %q", line, want)
		}
	}
	if !strings.Contains(tip, "1 test skipped\n") || !strings.Contains(tip, "Flagged") {
		t.Errorf("the tooltip is %q", tip)
	}
	var shown *fitLabel
	for _, o := range test.LaidOutObjects(r.Window.Content()) {
		if l, ok := o.(*fitLabel); ok && l.Text == line {
			shown = l
		}
	}
	if shown == nil || shown.Tip != tip {
		t.Fatalf("the review does not show the overview %q", line)
	}
	if r.Window.Content().MinSize().Width > 1000 {
		t.Errorf("the overview widens the window to %v", r.Window.Content().MinSize().Width)
	}

	plain := &review.Changeset{Files: []*review.File{{Path: "a.go", Status: review.Modified}}}
	if line, _ := secondLookText(plain); line != "" {
		t.Errorf("a changeset with no flag has the overview %q", line)
	}
	quiet := newTestReview(t, &fakeService{infos: []sandbox.Info{testInfo("1a2b3c4d")}, changesets: map[string]*review.Changeset{"1a2b3c4d": goldenChangeset(t)}})
	if quiet.files.flagged != nil {
		t.Error("a review with no flagged file offers the Flagged filter")
	}
	for _, o := range test.LaidOutObjects(quiet.Window.Content()) {
		if l, ok := o.(*fitLabel); ok && strings.Contains(l.Text, "second look") {
			t.Errorf("a review with no flagged file says %q", l.Text)
		}
	}
}

// Flagged shows only the flagged files, with the filter's text too;
// "Show only these" ticks it; unticked, every file is back.
func TestFlaggedFilter(t *testing.T) {
	r := newTestReview(t, flaggedService(t))
	all := len(r.m.files)
	test.Tap(findButton(t, r.Window, "Show only these"))
	if !r.files.flagged.Checked {
		t.Fatal("Show only these did not tick Flagged")
	}
	var shown []string
	for _, f := range r.m.files {
		shown = append(shown, f.Path)
	}
	want := []string{".github/workflows/ci.yml", "deploy/key.pem", "src/counter_test.go", "package.json"}
	if !slices.Equal(shown, want) {
		t.Errorf("Flagged shows %q, want %q", shown, want)
	}
	for _, row := range r.files.list.rows {
		if !isFolder(row.id) && !slices.Contains(want, row.id) {
			t.Errorf("the list shows the unflagged %s", row.id)
		}
	}
	if !strings.Contains(r.files.summary.Text, "(4 shown)") {
		t.Errorf("summary %q does not say how many are shown", r.files.summary.Text)
	}
	r.files.setFolder("") // as a tap beside the rows does
	if !strings.HasPrefix(r.files.folderLabel.Text, "All shown (4 files)") {
		t.Errorf("the folder buttons act on %q", r.files.folderLabel.Text)
	}
	// The folder buttons act on what is shown: only the flagged files.
	test.Tap(r.files.folderBtns[1])
	for _, f := range r.m.cs.Files {
		if got, flagged := r.m.fileState(f), len(f.Flags) > 0; flagged != (got == stateRejected) {
			t.Errorf("%s (flagged %v) is %v after Reject on the flagged files", f.Path, flagged, got)
		}
	}

	r.files.filter.SetText("src")
	if len(r.m.files) != 1 || r.m.files[0].Path != "src/counter_test.go" {
		t.Errorf("Flagged and the filter src show %d files", len(r.m.files))
	}
	r.files.filter.SetText("")
	r.files.flagged.SetChecked(false)
	if len(r.m.files) != all || strings.Contains(r.files.summary.Text, "shown") {
		t.Errorf("unticked, %d of %d files are shown (%q)", len(r.m.files), all, r.files.summary.Text)
	}
}

// Every kind of flag marks its row, each reason a line of the tip, what
// runs on the host first.
func TestRowWarningNamesEveryFlag(t *testing.T) {
	f := &review.File{Path: "package.json", Flags: []review.Flag{
		{Kind: review.FlagDependency, Reason: "dependencies: added left-pad"},
		{Kind: review.FlagHostExec, Reason: "runs on your machine: package.json scripts"},
		{Kind: review.FlagTestSkipped, Reason: "tests skipped: t.Skip on line 6"},
	}}
	want := "Runs on your machine: package.json scripts\nDependencies: added left-pad\nTests skipped: t.Skip on line 6"
	if got := rowWarning(f); got != want {
		t.Errorf("rowWarning = %q, want %q", got, want)
	}
	if got := rowWarning(&review.File{Path: "a.go"}); got != "" {
		t.Errorf("an unflagged file's warning is %q", got)
	}
	r := newTestReview(t, flaggedService(t))
	r.files.list.Select("src/counter_test.go")
	row := newFileRow(r.files.list)
	row.update(listRow{id: "src/counter_test.go", depth: 1})
	if !row.warn.Visible() || !strings.Contains(row.warn.Tip, "skip") {
		t.Errorf("the skipped test's row: warning shown %v, tip %q", row.warn.Visible(), row.warn.Tip)
	}
}

// The main window says a sandbox was committed or pushed beside its
// state, the commit and branch in the tooltip.
func TestMainWindowShowsStage(t *testing.T) {
	test.NewTempApp(t)
	infos := listInfos()
	infos[0].Status, infos[0].Stage = sandbox.StatusApplied, sandbox.StageCommitted
	infos[0].Promotion = &sandbox.Promotion{Commit: "0123456789abcdef0123", Branch: "main", Time: time.Date(2026, 11, 23, 9, 10, 0, 0, time.UTC)}
	infos[1].Status, infos[1].Stage = sandbox.StatusReady, sandbox.StagePushed
	infos[1].Promotion = &sandbox.Promotion{Commit: "fedcba9876543210", Branch: "agent/stop-words", NewBranch: true, Remote: "origin", Pushed: time.Date(2026, 11, 23, 9, 20, 0, 0, time.UTC), PullRequest: "https://github.com/dev/wordfreq/pull/7"}
	w := newMainAt(t, &fakeService{infos: infos}, testPresets(t))
	c := cellAt(t, w, 0, colState)
	if !strings.HasSuffix(c.label.Text, "·  committed") || !strings.Contains(c.label.Tip, "Committed 0123456789ab on main") {
		t.Errorf("committed: %q, tip %q", c.label.Text, c.label.Tip)
	}
	c = cellAt(t, w, 1, colState)
	if !strings.Contains(c.label.Text, "·  pushed") || !strings.Contains(c.label.Tip, "new branch agent/stop-words") || !strings.Contains(c.label.Tip, "pull/7") {
		t.Errorf("pushed: %q, tip %q", c.label.Text, c.label.Tip)
	}
	for row := 2; row < len(infos); row++ {
		if c := cellAt(t, w, row, colState); strings.Contains(c.label.Text, "committed") || strings.Contains(c.label.Text, "pushed") {
			t.Errorf("row %d, never committed, says %q", row, c.label.Text)
		}
	}
}

// dialogEntries are the entries of the window's top dialog.
func dialogEntries(t *testing.T, w fyne.Window) []*widget.Entry {
	t.Helper()
	top := w.Canvas().Overlays().Top()
	if top == nil {
		t.Fatal("no dialog")
	}
	var out []*widget.Entry
	for _, o := range test.LaidOutObjects(top) {
		if e, ok := o.(*widget.Entry); ok {
			out = append(out, e)
		}
	}
	return out
}

// dialogButton taps the button text of the window's top dialog.
func dialogButton(t *testing.T, w fyne.Window, text string) {
	t.Helper()
	for _, o := range test.LaidOutObjects(w.Canvas().Overlays().Top()) {
		if b, ok := o.(*widget.Button); ok && b.Text == text {
			test.Tap(b)
			return
		}
	}
	t.Fatalf("the dialog has no button %q", text)
}

// Apply and commit asks for the message, prefilled as apply --commit
// makes it, then applies and commits what is approved; the actions go
// after, as with an apply to the working tree.
func TestApplyAndCommit(t *testing.T) {
	svc := reviewService(t)
	svc.commitMsg = "Add stop words\n\nThe counter skips the, a, an."
	r := newTestReview(t, svc)
	if !r.promo.applyMenu.Disabled() {
		t.Error("the Apply menu is offered with nothing approved")
	}
	r.m.setAll(true)
	r.redraw()
	if r.promo.applyMenu.Disabled() {
		t.Fatal("the Apply menu is off with every file approved")
	}
	r.promo.askCommit()
	es := dialogEntries(t, r.Window)
	if len(es) != 1 || es[0].Text != svc.commitMsg {
		t.Fatalf("the commit dialog has %d entries, prefilled %q", len(es), es[0].Text)
	}
	es[0].SetText("Count words without stop words")
	dialogButton(t, r.Window, "Apply and commit")
	if len(svc.commits) != 1 || svc.commits[0].Message != "Count words without stop words" || svc.commits[0].Branch != "" {
		t.Fatalf("commits: %+v", svc.commits)
	}
	if len(svc.applied) != 1 || len(svc.applied[0].Files) == 0 {
		t.Errorf("the commit applied %+v", svc.applied)
	}
	if !strings.Contains(r.status.Text, "Committed c0ffee123456 \"Count words without stop words\" on main") {
		t.Errorf("status %q", r.status.Text)
	}
	if r.header.info.Stage != sandbox.StageCommitted && svc.infos[0].Stage != sandbox.StageCommitted {
		t.Error("the commit was not recorded")
	}
}

// Commit on a new branch asks the branch's name; it applies nothing to
// the working tree and sends no action; an empty name commits nothing.
func TestCommitOnNewBranch(t *testing.T) {
	svc := reviewService(t)
	svc.commitMsg = "Add stop words"
	svc.actions = map[string][]sandbox.ActionView{"1a2b3c4d": {githubComment(1, "done")}}
	svc.saved = map[string]review.Decisions{"1a2b3c4d": {Actions: map[int]review.Verdict{1: review.Approve}}}
	r := newTestReview(t, svc)
	r.m.setAll(true)
	r.redraw()

	r.promo.askBranch()
	dialogButton(t, r.Window, "Commit")
	if len(svc.commits) != 0 || !strings.Contains(r.status.Text, "name the new branch") {
		t.Fatalf("with no name: commits %+v, status %q", svc.commits, r.status.Text)
	}

	r.promo.askBranch()
	es := dialogEntries(t, r.Window)
	if len(es) != 2 || es[1].Text != "Add stop words" {
		t.Fatalf("the branch dialog has %d entries", len(es))
	}
	test.Type(es[0], "agent/stop-words")
	dialogButton(t, r.Window, "Commit")
	if len(svc.commits) != 1 || svc.commits[0].Branch != "agent/stop-words" || svc.commits[0].Message != "Add stop words" {
		t.Fatalf("commits: %+v", svc.commits)
	}
	if len(svc.applied) != 0 {
		t.Errorf("a new branch wrote into the working tree: %+v", svc.applied)
	}
	if len(svc.sentIDs) != 0 {
		t.Errorf("a new branch sent actions %v", svc.sentIDs)
	}
	if !strings.Contains(r.status.Text, "new branch agent/stop-words; your working tree is as it was") {
		t.Errorf("status %q", r.status.Text)
	}
}

// A refused commit says why and what to do; nothing is written.
func TestCommitRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"dirty index", fmt.Errorf("commit: nothing was applied: the index holds changes you staged (a.go), which the commit would take along with the sandbox's: commit or unstage them first (git commit, or git restore --staged PATH), or use --branch, which leaves the index alone"), "unstage them first"},
		{"not a repository", fmt.Errorf("commit: /home/dev/src/wordfreq is %w (git init makes it one, with a first commit)", promote.ErrNotGitRepo), "choose Apply to the working tree"},
		{"branch exists", fmt.Errorf("branch agent/x: %w: choose another name, or delete it (git branch -D agent/x)", promote.ErrBranchExists), "choose another name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := reviewService(t)
			svc.commitErr = tc.err
			r := newTestReview(t, svc)
			r.m.setAll(true)
			r.redraw()
			r.promo.applyAs(&promotion{message: "x", branch: map[bool]string{true: "agent/x"}[tc.name == "branch exists"]})
			if len(svc.applied) != 0 {
				t.Errorf("written: %+v", svc.applied)
			}
			if r.status.Text != "Nothing written or committed." {
				t.Errorf("status %q", r.status.Text)
			}
			if got := labelsText(r.Window.Canvas().Overlays().Top()); !strings.Contains(got, tc.want) {
				t.Errorf("the error says %q, not %q", got, tc.want)
			}
			if r.promo.applyBtn.Disabled() {
				t.Error("Apply stays off after the refusal")
			}
		})
	}
}
