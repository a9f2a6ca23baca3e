package gui

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func syncNow(f func()) { f() }

func newTestReview(t *testing.T, svc *fakeService) *ReviewWindow {
	t.Helper()
	test.NewTempApp(t)
	r, err := NewReviewWindow(fyne.CurrentApp(), svc, testInfo("1a2b3c4d"))
	if err != nil {
		t.Fatal(err)
	}
	r.async = syncNow
	// The user answers Yes to "<path> runs on your machine. Apply it?".
	r.confirm = func(_, _ string, answer func(bool)) { answer(true) }
	r.Window.Resize(fyne.NewSize(1100, 720))
	t.Cleanup(r.Window.Close)
	return r
}

func reviewService(t *testing.T) *fakeService {
	return &fakeService{
		infos:      []sandbox.Info{testInfo("1a2b3c4d")},
		changesets: map[string]*review.Changeset{"1a2b3c4d": testChangeset(t)},
		summary:    "## What I did\n\nAdded stop words to `count_words`.\n",
		transcript: "demo-agent: reading TODO.md\n\x1b[32mok\x1b[0m\n",
	}
}

func TestTreeGroupsByFolder(t *testing.T) {
	tr := newTree(testChangeset(t))
	want := map[string][]string{
		"":         {"docs/", "scripts/", "src/", "logo.png", "old.txt"},
		"docs/":    {"docs/guide.md"},
		"scripts/": {"scripts/run.sh"},
		"src/":     {"src/main.go", "src/new.go"},
	}
	if diff := cmp.Diff(want, tr.children); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
}

func TestHunkToggleFlipsDecision(t *testing.T) {
	r := newTestReview(t, reviewService(t))
	r.files.list.Select("src/main.go")
	f := r.m.current()
	if f.Path != "src/main.go" || len(r.diff.hunkCheck) != 3 {
		t.Fatalf("showing %s with %d hunk toggles, want src/main.go with 3", f.Path, len(r.diff.hunkCheck))
	}
	test.Tap(r.diff.hunkCheck[1])
	if !r.m.taken(f, 1) || r.m.taken(f, 0) || r.m.taken(f, 2) {
		t.Errorf("after one tap: hunks taken %v, want only hunk 2", selection(r.m, f))
	}
	if got := r.m.d.Files[f.Path].Hunks[1].Verdict; got != review.Approve {
		t.Errorf("hunk 2 verdict %q, want approve", got)
	}
	test.Tap(r.diff.hunkCheck[1])
	if r.m.taken(f, 1) {
		t.Errorf("after two taps: hunk 2 still taken")
	}
	if got := r.m.d.Files[f.Path].Hunks[1].Verdict; got != review.Reject {
		t.Errorf("hunk 2 verdict %q, want reject", got)
	}
}

func selection(m *reviewModel, f *review.File) []bool {
	sel, _ := m.d.Selection(f)
	return sel
}

func TestApplyPassesExactlyTheSelection(t *testing.T) {
	svc := reviewService(t)
	r := newTestReview(t, svc)
	r.files.list.Select("src/main.go")
	test.Tap(r.diff.hunkCheck[0])
	test.Tap(r.diff.hunkCheck[2])
	r.commentOnHunk(t, 0, "why this line?")
	r.files.list.Select("scripts/run.sh")
	r.key('A') // approve the whole file
	r.files.list.Select("old.txt")
	r.key('R')
	test.Tap(r.promo.applyBtn)

	got := svc.appliedDecisions()
	if len(got) != 1 {
		t.Fatalf("Apply called %d times, want 1", len(got))
	}
	want := review.Decisions{Files: map[string]review.FileDecision{
		"src/main.go": {Hunks: map[int]review.HunkDecision{
			0: {Verdict: review.Approve},
			2: {Verdict: review.Approve},
		}, Comments: []review.Comment{{Text: "why this line?", Start: 1, End: 5}}},
		"scripts/run.sh": {Verdict: review.Approve},
		"old.txt":        {Verdict: review.Reject},
	}}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("decisions passed to Apply (-want +got):\n%s", diff)
	}
	// And what they resolve to: hunks 1 and 3 of main.go, and run.sh.
	cs := svc.changesets["1a2b3c4d"]
	var touched []string
	for _, f := range cs.Files {
		if _, ok := got[0].Selection(f); ok {
			touched = append(touched, f.Path)
		}
	}
	if diff := cmp.Diff([]string{"scripts/run.sh", "src/main.go"}, touched); diff != "" {
		t.Errorf("files applied (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(r.status.Text, "Done: applied") {
		t.Errorf("status after apply = %q", r.status.Text)
	}
}

func TestReviewIsKeptWithTheSandbox(t *testing.T) {
	svc := reviewService(t)
	r := newTestReview(t, svc)
	r.files.list.Select("src/main.go")
	test.Tap(r.diff.hunkCheck[1])
	r.commentOnFile(t, "split this file")
	r.save()
	if _, ok := svc.saved["1a2b3c4d"]; !ok {
		t.Fatal("the review was not saved")
	}
	again := newTestReview(t, svc)
	f := again.m.cs.File("src/main.go")
	if diff := cmp.Diff([]bool{false, true, false}, selection(again.m, f)); diff != "" {
		t.Errorf("hunks taken after reopening (-want +got):\n%s", diff)
	}
	if got := again.m.d.Files["src/main.go"].Comments; len(got) != 1 || got[0].Text != "split this file" {
		t.Errorf("file comment after reopening: %+v", got)
	}
}

// TestStaleBaselineIsShown: when the project has moved on since the
// baseline, the review window says how far and what apply does about it;
// when it has not, it says nothing.
func TestStaleBaselineIsShown(t *testing.T) {
	if r := newTestReview(t, reviewService(t)); r.header.stale != nil {
		t.Errorf("a current baseline is reported: %q", r.header.stale.Text)
	}
	svc := reviewService(t)
	base := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	svc.stale = sandbox.Staleness{Baseline: base, Checked: base.Add(15 * time.Minute), Modified: 2, Added: 1, Paths: []string{"a", "b", "c"}}
	r := newTestReview(t, svc)
	if r.header.stale == nil {
		t.Fatal("a stale baseline is not reported")
	}
	if want := "Baseline is 15 minutes and 3 files behind the project (2 modified, 1 added). Applying merges"; !strings.HasPrefix(r.header.stale.Text, want) {
		t.Errorf("stale line %q, want it to start with %q", r.header.stale.Text, want)
	}
}

func TestKeyboard(t *testing.T) {
	r := newTestReview(t, reviewService(t))
	r.files.list.Select("src/main.go")
	c := r.Window.Canvas()
	test.TypeOnCanvas(c, "jj") // to hunk 3
	if r.m.hunk != 2 {
		t.Fatalf("after jj: hunk %d, want 2", r.m.hunk)
	}
	test.TypeOnCanvas(c, "a")
	f := r.m.cs.File("src/main.go")
	if diff := cmp.Diff([]bool{false, false, true}, selection(r.m, f)); diff != "" {
		t.Errorf("after a on hunk 3 (-want +got):\n%s", diff)
	}
	test.TypeOnCanvas(c, "j") // past the last hunk: the next file
	if got := r.m.current().Path; got != "src/new.go" {
		t.Errorf("after j on the last hunk: file %s, want src/new.go", got)
	}
	test.TypeOnCanvas(c, "p")
	if got := r.m.current().Path; got != "src/main.go" || r.m.hunk != 2 {
		t.Errorf("after p: %s hunk %d, want src/main.go hunk 2", got, r.m.hunk)
	}
	test.TypeOnCanvas(c, "kr")
	if diff := cmp.Diff([]bool{false, false, true}, selection(r.m, f)); diff != "" {
		t.Errorf("after k r (-want +got):\n%s", diff)
	}
	if got := r.m.d.Files[f.Path].Hunks[1].Verdict; got != review.Reject {
		t.Errorf("hunk 2 after r: %q, want reject", got)
	}
}

// TestSendBackSavesTheReviewAndReplies: Send back keeps the comments and
// rejections with the sandbox (the agent's next prompt is built from
// them) and sends the message; an empty message is refused.
func TestSendBackSavesTheReviewAndReplies(t *testing.T) {
	svc := reviewService(t)
	r := newTestReview(t, svc)
	if r.rounds.sendBtn.Disabled() {
		t.Fatal("Send back to agent is disabled")
	}
	r.files.list.Select("src/main.go")
	test.Tap(r.diff.hunkCheck[1])
	r.commentOnFile(t, "split this file")
	r.SendBack("  ")
	if len(svc.replies) != 0 {
		t.Fatal("an empty message was sent")
	}
	r.SendBack("Keep the old name.")
	if diff := cmp.Diff([]string{"1a2b3c4d: Keep the old name."}, svc.replies); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	if got := svc.saved["1a2b3c4d"].Files["src/main.go"].Comments; len(got) != 1 || got[0].Text != "split this file" {
		t.Errorf("the comment was not saved before sending back: %+v", got)
	}
	if !strings.Contains(r.status.Text, "Round 2 is ready") {
		t.Errorf("status: %q", r.status.Text)
	}
}

// TestStopSendBack: while a Send back round runs, Stop the round cancels
// its context (the service stops its VM), and the window says the round
// was stopped; closing the window stops it too.
func TestStopSendBack(t *testing.T) {
	for _, how := range []string{"stop button", "close window"} {
		t.Run(how, func(t *testing.T) {
			svc := reviewService(t)
			started, ended := make(chan struct{}), make(chan error, 1)
			svc.reply = func(ctx context.Context, req ReplyRequest) (*pipeline.RunResult, error) {
				close(started)
				<-ctx.Done()
				ended <- ctx.Err()
				return nil, fmt.Errorf("sandbox %s: boot: %w", req.ID, ctx.Err())
			}
			test.NewTempApp(t)
			r, err := NewReviewWindow(fyne.CurrentApp(), svc, testInfo("1a2b3c4d"))
			if err != nil {
				t.Fatal(err)
			}
			if how == "stop button" {
				t.Cleanup(r.Window.Close)
			}
			done := make(chan struct{})
			r.async = func(f func()) { go func() { f(); close(done) }() }
			if r.rounds.stopBtn.Visible() {
				t.Fatal("Stop the round is shown with no round running")
			}
			r.SendBack("Keep the old name.")
			<-started
			if !r.rounds.stopBtn.Visible() || !r.rounds.sendBtn.Disabled() {
				t.Fatalf("while the round runs: stop shown %v, send disabled %v", r.rounds.stopBtn.Visible(), r.rounds.sendBtn.Disabled())
			}
			if how == "stop button" {
				test.Tap(r.rounds.stopBtn)
			} else {
				r.closeRequested()
			}
			if err := <-ended; !errors.Is(err, context.Canceled) {
				t.Errorf("the round's context ended with %v", err)
			}
			<-done
			if how == "stop button" {
				if r.rounds.stopBtn.Visible() || r.rounds.sendBtn.Disabled() || !strings.Contains(r.status.Text, "Round stopped") {
					t.Errorf("after the stop: stop shown %v, send disabled %v, status %q", r.rounds.stopBtn.Visible(), r.rounds.sendBtn.Disabled(), r.status.Text)
				}
			}
		})
	}
}

func TestPlainChanges(t *testing.T) {
	cs := testChangeset(t)
	for _, tc := range []struct {
		path string
		want string
	}{
		{"docs/guide.md", "Renamed from guide.md"},
		{"scripts/run.sh", "Mode changed from 0644 to 0755"},
		{"logo.png", "Binary file: 6 B before, 7 B after (not shown)"},
		{"old.txt", "Deleted"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got := describeFile(cs.File(tc.path))
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("describeFile = %q, want a line %q", got, tc.want)
			}
		})
	}
}

// TestPlainChangesTypeChange: a type change is said in words, with what
// goes with it when a directory is involved, and no mode change between
// a file's and a directory's modes.
func TestPlainChangesTypeChange(t *testing.T) {
	for _, tc := range []struct {
		old, new manifest.Type
		want     string
	}{
		{manifest.File, manifest.Dir, "Changed from a file to a directory: the file is removed, then what is under the directory is made; approve this change with those under it"},
		{manifest.Dir, manifest.File, "Changed from a directory to a file: everything under the directory is removed first, then the file is made; approve this change with those under it"},
		{manifest.Symlink, manifest.Dir, "Changed from a symbolic link to a directory: the symbolic link is removed"},
		{manifest.File, manifest.Symlink, "Changed from a file to a symbolic link"},
	} {
		f := &review.File{Path: "lib", Status: review.TypeChanged,
			Old: &review.Side{Type: tc.old, Mode: 0o644}, New: &review.Side{Type: tc.new, Mode: 0o755}}
		got := strings.Join(describeFile(f), "\n")
		if !strings.Contains(got, tc.want) || strings.Contains(got, "Mode changed") {
			t.Errorf("describeFile = %q, want a line %q", got, tc.want)
		}
	}
}

// TestPlainChangesModeFlag: a mode the sandbox asked for that git cannot
// show is said in words above the diff.
func TestPlainChangesModeFlag(t *testing.T) {
	f := &review.File{Path: "open", Status: review.ModeChanged,
		Old:   &review.Side{Type: manifest.Dir, Mode: 0o755},
		New:   &review.Side{Type: manifest.Dir, Mode: 0o777},
		Flags: []review.Flag{{Kind: review.FlagMode, Reason: "directory mode change 0755 → 0777 from the sandbox, not applied"}}}
	got := strings.Join(describeFile(f), "\n")
	if !strings.Contains(got, "Mode: directory mode change 0755 → 0777 from the sandbox, not applied") {
		t.Errorf("describeFile = %q", got)
	}
}

func TestRationaleFallsBackToTheLastOutput(t *testing.T) {
	svc := reviewService(t)
	svc.summary = ""
	svc.transcript = strings.Repeat("working\n", 30) + "\x1b[1mAll done: stop words added.\x1b[0m\n"
	r := newTestReview(t, svc)
	r.tabs.SelectIndex(1)
	markup := test.RenderToMarkup(r.Window.Canvas())
	for _, want := range []string{"wrote no summary", "All done: stop words added."} {
		if !strings.Contains(markup, want) {
			t.Errorf("the rationale tab does not show %q", want)
		}
	}
}

func newTestMain(t *testing.T, svc *fakeService) *MainWindow {
	t.Helper()
	test.NewTempApp(t)
	w := NewMainWindow(fyne.CurrentApp(), svc, Presets("/nonexistent/demo-agent.sh", nil, nil))
	w.async = syncNow
	w.now = func() time.Time { return time.Date(2026, 11, 23, 9, 5, 0, 0, time.UTC) }
	w.Window.Resize(fyne.NewSize(1100, 400))
	w.table.Refresh()
	t.Cleanup(w.Window.Close)
	return w
}

func TestDropFolderOpensRunDialog(t *testing.T) {
	w := newTestMain(t, &fakeService{})
	dir := t.TempDir()
	w.Drop([]string{dir})
	d := w.RunDialog()
	if d == nil {
		t.Fatal("no run dialog after dropping a folder")
	}
	if d.Project.Text != dir {
		t.Errorf("run dialog project = %q, want %q", d.Project.Text, dir)
	}
	if !strings.Contains(test.RenderToMarkup(w.Window.Canvas()), "New run") {
		t.Error("the run dialog is not on the window")
	}
}

// A project in the home folder shows as ~/…, as in the main window; the
// run is on the whole path.
func TestRunDialogShowsHomeAsTilde(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := filepath.Join(home, "src", "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := newTestMain(t, &fakeService{})
	w.Drop([]string{dir})
	d := w.RunDialog()
	if d == nil {
		t.Fatal("no run dialog after dropping a folder")
	}
	if d.Project.Text != "~/src/app" {
		t.Errorf("run dialog shows %q, want ~/src/app", d.Project.Text)
	}
	if req, _ := d.Request(); req.Project != dir {
		t.Errorf("the run's project is %q, want %q", req.Project, dir)
	}
}

func TestDropRefusals(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o700) })
	cases := []struct {
		name  string
		paths []string
		want  string
		skip  bool
	}{
		{"file", []string{file}, "notes.txt is a file, not a folder", false},
		{"missing", []string{filepath.Join(dir, "gone")}, "cannot be opened", false},
		{"unreadable", []string{locked}, "cannot be read", os.Geteuid() == 0},
		{"several", []string{dir, dir}, "drop one project folder at a time", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				testenv.Skip(t, testenv.NonRoot, "root reads any folder")
			}
			w := newTestMain(t, &fakeService{})
			w.Drop(tc.paths)
			if w.RunDialog() != nil {
				t.Error("a run dialog opened")
			}
			if !strings.Contains(w.Message(), tc.want) {
				t.Errorf("message %q, want it to say %q", w.Message(), tc.want)
			}
			// The app carries on: a folder dropped next still works.
			w.Drop([]string{dir})
			if w.RunDialog() == nil {
				t.Error("no run dialog for a folder dropped after a refusal")
			}
		})
	}
}

func TestDeadVMShowsItsState(t *testing.T) {
	dead := testInfo("deadbeef")
	dead.Status, dead.Changes, dead.Live = sandbox.StatusRunning, nil, false
	if got := statusText(dead); got != "stopped: its VM is gone (was running)" {
		t.Errorf("statusText = %q", got)
	}
	w := newTestMain(t, &fakeService{infos: []sandbox.Info{dead, testInfo("1a2b3c4d")}})
	if markup := test.RenderToMarkup(w.Window.Canvas()); !strings.Contains(markup, "stopped: its VM is gone") {
		t.Error("the main window does not show the dead VM's state")
	}
}

func TestRunFromDialog(t *testing.T) {
	project := t.TempDir()
	script := filepath.Join(t.TempDir(), "demo-agent.sh")
	if err := os.WriteFile(script, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var typed string
	svc := &fakeService{}
	svc.run = func(ctx context.Context, req RunRequest) (*pipeline.RunResult, error) {
		req.Progress(pipeline.Progress{Step: pipeline.StepCreated, Sandbox: "1a2b3c4d"})
		req.Progress(pipeline.Progress{Step: pipeline.StepPush, Message: "push", Done: 3, Total: 6})
		req.Output.Write([]byte("hello \x1b[31mred\x1b[0m world\r\n"))
		// The user types into the run view's terminal (focused on open).
		for _, win := range fyne.CurrentApp().Driver().AllWindows() {
			if strings.HasPrefix(win.Title(), "Run: ") {
				test.Type(win.Canvas().Focused(), "y")
			}
		}
		buf := make([]byte, 8)
		n, _ := req.Input.Read(buf)
		typed = string(buf[:n])
		info := testInfo("1a2b3c4d")
		svc.mu.Lock()
		svc.infos = []sandbox.Info{info}
		svc.mu.Unlock()
		return &pipeline.RunResult{Meta: info.Meta}, nil
	}
	svc.changesets = map[string]*review.Changeset{"1a2b3c4d": testChangeset(t)}
	test.NewTempApp(t)
	w := NewMainWindow(fyne.CurrentApp(), svc, Presets(script, nil, nil))
	w.async = syncNow
	t.Cleanup(w.Window.Close)
	w.Drop([]string{project})
	d := w.RunDialog()
	d.Prompt.SetText("add stop words")
	req, err := d.Request()
	if err != nil {
		t.Fatal(err)
	}
	if req.ScriptName != "demo-agent.sh" || string(req.Script) != "echo hi\n" || req.Prompt != "add stop words" || req.MemoryMiB != 0 || req.CPUs != 0 || req.Timeout != 0 {
		t.Errorf("request = %+v", req)
	}
	test.AssertNotificationSent(t, fyne.NewNotification("Airlock run finished", filepath.Base(project)+": 6 files changed, ready for review"), d.Start)
	if typed != "y" {
		t.Errorf("the agent read %q from the terminal, want y", typed)
	}
	run := w.runs["1a2b3c4d"]
	if run == nil {
		t.Fatal("the main window does not track the run")
	}
	if got := run.view.term.Text(); !strings.Contains(got, "hello red world") {
		t.Errorf("terminal shows %q", got)
	}
	if got := run.view.state.Text; !strings.HasPrefix(got, "ready for review (exit 0): 6 files changed") {
		t.Errorf("run view state %q", got)
	}
	if run.view.review.Disabled() {
		t.Error("Review changes is disabled after a run with changes")
	}
	test.Tap(run.view.review)
	if w.reviews["1a2b3c4d"] == nil {
		t.Error("Review changes did not open the review window")
	}
}

func TestStopEndsTheRun(t *testing.T) {
	started, done := make(chan struct{}), make(chan struct{})
	svc := &fakeService{}
	svc.run = func(ctx context.Context, req RunRequest) (*pipeline.RunResult, error) {
		req.Progress(pipeline.Progress{Step: pipeline.StepCreated, Sandbox: "5709abcd"})
		req.Progress(pipeline.Progress{Step: pipeline.StepRun, Message: "running sh demo-agent.sh"})
		close(started)
		<-ctx.Done()
		return nil, fmt.Errorf("run: %w", ctx.Err())
	}
	w := newTestMain(t, svc)
	w.async = func(f func()) {
		go func() {
			defer close(done)
			f()
		}()
	}
	w.Drop([]string{t.TempDir()})
	w.RunDialog().Preset.SetSelectedIndex(1)
	w.RunDialog().Command.SetText("sleep 600")
	w.RunDialog().Start()
	<-started
	view := w.runs["5709abcd"].view
	if got := view.state.Text; got != "running sh demo-agent.sh" {
		t.Errorf("state while running: %q", got)
	}
	test.Tap(view.stopBtn)
	<-done
	if got := view.state.Text; !strings.HasPrefix(got, "stopped") {
		t.Errorf("state after Stop: %q", got)
	}
	if !view.stopBtn.Disabled() {
		t.Error("Stop is still enabled after the run ended")
	}
	if got := svc.runs[0].Command; !cmp.Equal(got, []string{"sh", "-c", "sleep 600"}) {
		t.Errorf("command run: %q", got)
	}
}

func TestTerminalColoursAndKeys(t *testing.T) {
	test.NewTempApp(t)
	term := newTerminal(40, 5)
	w := test.NewTempWindow(t, term)
	w.Resize(fyne.NewSize(400, 120))
	term.Write([]byte("plain \x1b[1;32mgreen\x1b[0m \xe2\x9c"))
	term.Write([]byte("\x93 done")) // a rune split across writes
	if got := strings.SplitN(term.Text(), "\n", 2)[0]; !strings.HasPrefix(got, "plain green ✓ done") {
		t.Errorf("first row %q", got)
	}
	st := term.grid.Rows[0].Cells[6].Style.TextColor()
	if st != ansi16[10] { // bold green is bright green
		t.Errorf("colour of 'green' = %v, want ANSI green", st)
	}
	test.Type(term, "ls")
	term.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	term.TypedShortcut(&fyne.ShortcutCopy{})
	buf := make([]byte, 16)
	n, _ := term.Input().Read(buf)
	if got := string(buf[:n]); got != "ls\r\x03" {
		t.Errorf("input %q, want %q", got, "ls\r\x03")
	}
	select {
	case ws := <-term.resizes:
		if ws.Cols == 40 && ws.Rows == 5 {
			t.Errorf("resize kept the initial size %+v", ws)
		}
	default:
		t.Error("resizing the widget sent no window size")
	}
}

// TestFanOutOpensCompare: selecting an attempt of a fan-out opens the
// compare window with every attempt; its Review button opens that
// attempt's review.
func TestFanOutOpensCompare(t *testing.T) {
	svc := reviewService(t)
	svc.infos = nil
	for k, id := range []string{"aaaa0001", "aaaa0002", "aaaa0003"} {
		in := testInfo(id)
		in.Group, in.Attempt = "9c1e04aa", k+1
		svc.infos = append(svc.infos, in)
		svc.changesets[id] = testChangeset(t)
	}
	svc.infos[2].Status = sandbox.StatusFailed
	w := newTestMain(t, svc)
	w.Reload()
	w.open(1)
	var c *CompareWindow
	for _, win := range fyne.CurrentApp().Driver().AllWindows() {
		if win.Title() == "Compare attempts of 9c1e04aa" {
			c = &CompareWindow{Window: win}
		}
	}
	if c == nil {
		t.Fatal("no compare window opened")
	}
	c = w.OpenCompare("9c1e04aa")
	if len(c.Rows) != 3 || c.Rows[1].Attempt != 2 {
		t.Fatalf("compare rows: %+v", c.Rows)
	}
	if !c.Review[2].Disabled() || c.Review[0].Disabled() {
		t.Error("a failed attempt can be reviewed, or a ready one cannot")
	}
	test.Tap(c.Review[1])
	if _, ok := w.reviews["aaaa0002"]; !ok {
		t.Error("Review did not open the attempt's review window")
	}
}

// TestReviewShowsTheLastRound: after a reply round the review offers what
// that round changed, read only, and goes back to the whole review (what
// Apply writes) with its decisions untouched.
func TestReviewShowsTheLastRound(t *testing.T) {
	svc := reviewService(t)
	info := testInfo("1a2b3c4d")
	info.Round = 2
	svc.infos = []sandbox.Info{info}
	full := svc.changesets["1a2b3c4d"]
	svc.rounds = map[string]*review.Changeset{"1a2b3c4d": {Files: []*review.File{full.File("src/new.go")}}}
	test.NewTempApp(t)
	r, err := NewReviewWindow(fyne.CurrentApp(), svc, info)
	if err != nil {
		t.Fatal(err)
	}
	r.async = syncNow
	t.Cleanup(r.Window.Close)
	if r.view == nil {
		t.Fatal("a round-2 review has no round selector")
	}
	r.files.list.Select("src/main.go")
	test.Tap(r.diff.hunkCheck[0])
	before := svc.saved["1a2b3c4d"]

	r.view.SetSelectedIndex(1)
	if !r.roundOnly {
		t.Fatal("selecting the last round did not switch the view")
	}
	if diff := cmp.Diff([]string{"src/"}, r.m.tree.children[""]); diff != "" {
		t.Errorf("round view tree (-want +got):\n%s", diff)
	}
	if f := r.m.current(); f == nil || f.Path != "src/new.go" {
		t.Errorf("round view shows %v, want src/new.go", f)
	}
	for name, b := range map[string]*widget.Button{"apply": r.promo.applyBtn, "approve all": r.files.approveAll, "send back": r.rounds.sendBtn} {
		if !b.Disabled() {
			t.Errorf("%s is enabled in the read-only round view", name)
		}
	}
	for i, c := range r.diff.hunkCheck {
		if !c.Disabled() {
			t.Errorf("hunk toggle %d is enabled in the round view", i)
		}
	}

	r.view.SetSelectedIndex(0)
	if r.roundOnly || r.files.approveAll.Disabled() || r.rounds.sendBtn.Disabled() {
		t.Error("back to all changes: still read only")
	}
	if len(r.m.tree.children[""]) != 5 {
		t.Errorf("whole review tree: %v", r.m.tree.children[""])
	}
	if diff := cmp.Diff(before, svc.saved["1a2b3c4d"]); diff != "" {
		t.Errorf("the round view changed the saved review (-before +after):\n%s", diff)
	}
	r.files.list.Select("src/main.go")
	if !r.m.taken(r.m.current(), 0) {
		t.Error("the decision made before the round view was lost")
	}
}

// sentBackReview sends the review of svc's first sandbox back from the
// main window and returns the review opened again on the new round.
func sentBackReview(t *testing.T, svc *fakeService) *ReviewWindow {
	t.Helper()
	w := newTestMain(t, svc)
	r := w.OpenReview(svc.infos[0])
	r.SendBack("Keep the old name.")
	nr := w.reviews["1a2b3c4d"]
	if nr == nil || nr == r {
		t.Fatal("the review was not opened again on the new round")
	}
	t.Cleanup(nr.Window.Close)
	return nr
}

// TestSendBackFromTheMainWindowOpensTheNewRound: once the round is ready,
// the review opens again on it, showing what the round changed.
func TestSendBackFromTheMainWindowOpensTheNewRound(t *testing.T) {
	svc := reviewService(t)
	svc.rounds = map[string]*review.Changeset{"1a2b3c4d": {Files: []*review.File{svc.changesets["1a2b3c4d"].File("src/new.go")}}}
	nr := sentBackReview(t, svc)
	if nr.view == nil || !nr.roundOnly {
		t.Errorf("the new review does not show the new round (selector %v, round only %v)", nr.view != nil, nr.roundOnly)
	}
}

// The attack: an approved file that runs on the user's machine
// (scripts/run.sh, made executable) is not written without a question,
// asked once per such file; No leaves it out of this apply only.
func TestApplyAsksOncePerHostExecFile(t *testing.T) {
	svc := reviewService(t)
	r := newTestReview(t, svc)
	var asked []string
	answer := false
	r.confirm = func(title, message string, reply func(bool)) {
		asked = append(asked, message)
		reply(answer)
	}
	r.files.list.Select("scripts/run.sh")
	if !strings.Contains(r.diffText(), "Made executable: it can be run on your machine. Apply asks before writing it.") {
		t.Errorf("the file's header does not say it runs on your machine:\n%s", r.diffText())
	}
	r.m.setAll(true)
	r.refresh()
	test.Tap(r.promo.applyBtn)
	want := []string{"scripts/run.sh runs on your machine (made executable: it can be run on your machine).\n\nApply it?"}
	if diff := cmp.Diff(want, asked); diff != "" {
		t.Errorf("questions (-want +got):\n%s", diff)
	}
	got := svc.appliedDecisions()
	if len(got) != 1 {
		t.Fatalf("Apply called %d times, want 1", len(got))
	}
	if _, ok := got[0].Files["scripts/run.sh"]; ok {
		t.Errorf("answered No, but scripts/run.sh was passed to Apply: %+v", got[0].Files)
	}
	if _, ok := got[0].Files["src/main.go"]; !ok {
		t.Errorf("the other files were not applied: %+v", got[0].Files)
	}
	if !strings.Contains(r.status.Text, "Left out (runs on your machine): scripts/run.sh.") {
		t.Errorf("status = %q", r.status.Text)
	}
	if r.m.d.Files["scripts/run.sh"].Verdict != review.Approve {
		t.Error("No changed the review's verdict; it leaves the file out of this apply only")
	}

	asked, answer = nil, true
	test.Tap(r.promo.applyBtn)
	if got := svc.appliedDecisions(); len(asked) != 1 || len(got) != 2 || got[1].Files["scripts/run.sh"].Verdict != review.Approve {
		t.Errorf("Yes: asked %d times, Apply got %+v", len(asked), got)
	}

	// Only the flagged file approved, and No: nothing is applied.
	r.m.setAll(false)
	r.m.setFile(r.m.cs.File("scripts/run.sh"), true)
	r.refresh()
	asked, answer = nil, false
	test.Tap(r.promo.applyBtn)
	if n := len(svc.appliedDecisions()); len(asked) != 1 || n != 2 {
		t.Errorf("asked %d times, Apply called %d times in all, want 1 and 2", len(asked), n)
	}
	if !strings.HasPrefix(r.status.Text, "Nothing applied. Left out") {
		t.Errorf("status = %q", r.status.Text)
	}
}

// diffText is the text of every label in the diff pane, a line each.
func (r *ReviewWindow) diffText() string {
	return labelsText(r.diff.dv.head) + labelsText(r.diff.box)
}

// What the guest left out of the changes (a file over the size cap)
// stays in the run's terminal, its name made safe, and the line that
// ends the run says how many.
func TestRunViewShowsLeftOut(t *testing.T) {
	test.NewTempApp(t)
	v := NewRunView(fyne.CurrentApp(), RunRequest{Project: t.TempDir(), Command: []string{"make"}})
	t.Cleanup(v.Window.Close)
	v.progress(pipeline.Progress{Step: pipeline.StepCollect, Message: "left out of the changes (1): big\x1b[31m.bin (3.0 GiB, over the 1.0 GiB cap)",
		Excluded: []manifest.Exclusion{{Path: "big\x1b[31m.bin", Reason: manifest.ReasonTooLarge, Size: 3 << 30}}})
	v.progress(pipeline.Progress{Step: pipeline.StepCollect, Message: "pulling", Done: 1, Total: 1})
	got := v.term.Text()
	if !strings.Contains(got, `big\x1b[31m.bin (3.0 GiB, over the 1.0 GiB cap)`) {
		t.Errorf("terminal shows %q, want the left-out file with its escape made visible", got)
	}
	info := testInfo("1a2b3c4d")
	v.finished(&pipeline.RunResult{Meta: info.Meta}, nil)
	if !strings.HasSuffix(v.state.Text, "; 1 left out (named in the terminal)") {
		t.Errorf("run view state %q", v.state.Text)
	}
}

// longCommandReview is the review window of a sandbox whose command was
// the shell line line.
func longCommandReview(t *testing.T, line string) *ReviewWindow {
	t.Helper()
	svc := reviewService(t)
	info := testInfo("1a2b3c4d")
	info.ScriptName, info.Command = "", []string{"sh", "-c", line}
	svc.infos = []sandbox.Info{info}
	test.NewTempApp(t)
	r, err := NewReviewWindow(fyne.CurrentApp(), svc, info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Window.Close)
	return r
}

// TestReviewWindowLongCommand: a 1000-character command line does not
// set the review window's minimum width; the action bar stays on a
// 1280-pixel screen.
func TestReviewWindowLongCommand(t *testing.T) {
	r := longCommandReview(t, strings.Repeat("echo a-long-shell-line; ", 42))
	if w := r.Window.Content().MinSize().Width; w > 1280 {
		t.Errorf("the review window needs %.0f px for a long command line, want at most 1280", w)
	}
}

// TestReviewWindowNamesSecretsLeftOut: the review says which files never
// reached the VM because they look like secrets, as the CLI does.
func TestReviewWindowNamesSecretsLeftOut(t *testing.T) {
	svc := reviewService(t)
	info := testInfo("1a2b3c4d")
	info.Secrets = []string{".env", "deploy/id_ed25519"}
	svc.infos = []sandbox.Info{info}
	test.NewTempApp(t)
	r, err := NewReviewWindow(fyne.CurrentApp(), svc, info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Window.Close)
	var found bool
	for _, l := range findAll[*fitLabel](r.Window) {
		if strings.Contains(l.Text, ".env") && strings.Contains(l.Text, "deploy/id_ed25519") {
			found = true
		}
	}
	if !found {
		t.Error("the review window does not name the secrets left out of the copy")
	}
}

// TestCompareWindowLongReason: a failed attempt's long reason does not
// widen the compare window; it is cut, whole in its tooltip.
func TestCompareWindowLongReason(t *testing.T) {
	svc := reviewService(t)
	reason := "agent exited with status 1: " + strings.Repeat("npm ERR! could not resolve the dependency tree; ", 40)
	in := testInfo("aaaa0001")
	in.Group, in.Attempt, in.Status, in.Error = "9c1e04aa", 1, sandbox.StatusFailed, reason
	svc.infos = []sandbox.Info{in}
	test.NewTempApp(t)
	c, err := NewCompareWindow(fyne.CurrentApp(), svc, "Compare", []string{"9c1e04aa"}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Window.Close)
	if w := c.Window.Content().MinSize().Width; w > 1280 {
		t.Errorf("the compare window needs %.0f px for a long reason, want at most 1280", w)
	}
	var whole bool
	for _, l := range findAll[*tipLabel](c.Window) {
		whole = whole || strings.Contains(l.Text, reason)
	}
	if !whole {
		t.Error("no cell holds the whole reason for its tooltip")
	}
}
