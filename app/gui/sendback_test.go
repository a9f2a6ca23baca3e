package gui

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

// TestSendBackDialog: the message box is wide, several rows tall and
// wraps, whatever was typed; the dialog says what goes with the message.
func TestSendBackDialog(t *testing.T) {
	svc := reviewService(t)
	var d review.Decisions
	d.AddComment("src/main.go", review.Comment{Text: "why twenty?", Start: 20, End: 20})
	d.AddComment("src/main.go", review.Comment{Text: "said", Start: 2, End: 2, Sent: 2})
	d.AddComment("src/new.go", review.Comment{Text: "fine now", Resolved: true})
	d.AddComment("src/new.go", review.Comment{Text: "add a test"})
	d.SetHunk("src/main.go", 1, review.Reject)
	d.SetHunk("src/main.go", 2, review.Reject)
	svc.saved = map[string]review.Decisions{"1a2b3c4d": d}
	r := newTestReview(t, svc)

	fb := r.rounds.feedback()
	if got, want := sendBackWhat(fb), "With it, 2 comments and 2 rejected hunks will be sent."; !strings.HasPrefix(got, want) {
		t.Errorf("what goes: %q, want %q…", got, want)
	}
	form, msg := sendBackForm(fb)
	one, two := widget.NewMultiLineEntry(), widget.NewMultiLineEntry()
	one.SetMinRowsVisible(1)
	two.SetMinRowsVisible(2)
	if min := form.MinSize(); min.Width < sendBackWidth {
		t.Errorf("the form is %v wide, want at least %d", min.Width, sendBackWidth)
	}
	row := two.MinSize().Height - one.MinSize().Height
	if h := msg.MinSize().Height; h < one.MinSize().Height+5*row {
		t.Errorf("the message box is %v tall, a row %v: want %d rows", h, row, sendBackRows)
	}
	if msg.Wrapping != fyne.TextWrapWord {
		t.Errorf("the message box wraps %v", msg.Wrapping)
	}
	// A long line typed in does not widen the form: it wraps.
	test.Type(msg, strings.Repeat("keep the old name please ", 20))
	if w := form.MinSize().Width; w > sendBackWidth+1 {
		t.Errorf("typing widened the form to %v", w)
	}

	// The dialog itself, on the window.
	r.rounds.askSendBack()
	top := r.Window.Canvas().Overlays().Top()
	if top == nil {
		t.Fatal("no dialog")
	}
	if w := top.MinSize().Width; w < sendBackWidth {
		t.Errorf("the dialog is %v wide", w)
	}
	if !strings.Contains(labelsText(top), "2 comments and 2 rejected hunks will be sent") {
		t.Errorf("the dialog does not say what goes with the message:\n%s", labelsText(top))
	}
	if sendBackWhat(review.Feedback{}) == "" {
		t.Error("nothing said when only the message goes")
	}
}

// labelsText is the text of every label under o.
func labelsText(o fyne.CanvasObject) string {
	var b strings.Builder
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		switch w := o.(type) {
		case *widget.Label:
			b.WriteString(w.Text + "\n")
		case *fyne.Container:
			for _, c := range w.Objects {
				walk(c)
			}
		case fyne.Widget:
			for _, c := range test.WidgetRenderer(w).Objects() {
				walk(c)
			}
		}
	}
	walk(o)
	return b.String()
}

// TestCommentsTab: the Comments tab lists every comment with its file,
// lines and state; a click shows the file.
func TestCommentsTab(t *testing.T) {
	svc := reviewService(t)
	var d review.Decisions
	d.AddComment("src/new.go", review.Comment{Text: "add a test\nand a doc", Start: 3, End: 3})
	d.AddComment("src/main.go", review.Comment{Text: "why twenty?", Start: 20, End: 21, Sent: 2})
	d.AddComment("src/main.go", review.Comment{Text: "fine now", Resolved: true})
	d.AddComment("old.txt", review.Comment{Text: "keep it", Start: 1, End: 1, Old: true})
	svc.saved = map[string]review.Decisions{"1a2b3c4d": d}
	r := newTestReview(t, svc)
	c := r.comments
	if got := c.list.Length(); got != 4 {
		t.Fatalf("%d comments listed, want 4", got)
	}
	if got, want := c.count.Text, "4 comments: 2 not sent yet, 1 sent, 1 resolved."; got != want {
		t.Errorf("count %q, want %q", got, want)
	}
	var rows []string
	for _, it := range c.items {
		rows = append(rows, fmt.Sprintf("%s · %s · %s", it.Path, it.Where(), it.State()))
	}
	want := []string{
		"old.txt · removed line 1 · not sent yet",
		"src/main.go · the whole file · resolved",
		"src/main.go · lines 20-21 · sent in round 2",
		"src/new.go · line 3 · not sent yet",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	r.tabs.SelectIndex(3)
	c.list.Select(3)
	if f := r.m.current(); f == nil || f.Path != "src/new.go" || r.tabs.SelectedIndex() != 0 {
		t.Errorf("after a click on the src/new.go comment: file %v, tab %d", f, r.tabs.SelectedIndex())
	}
	// A new comment shows up once the review changes.
	r.m.d.Files["src/main.go"] = review.FileDecision{Comments: append(r.m.d.Files["src/main.go"].Comments, review.Comment{Text: "one more"})}
	r.refresh()
	if got := c.list.Length(); got != 5 {
		t.Errorf("%d comments after adding one", got)
	}
}

// TestTranscriptOfEachRound: a sandbox of two rounds shows the latest
// round's transcript with the prompt that started it; the selector shows
// round 1's.
func TestTranscriptOfEachRound(t *testing.T) {
	svc := reviewService(t)
	svc.infos[0].Round = 2
	svc.rounds = map[string]*review.Changeset{"1a2b3c4d": testChangeset(t)}
	svc.roundLogs = map[string][]sandbox.RoundLog{"1a2b3c4d": {
		{Round: 1, Transcript: []byte("first round output\n"), Kept: true},
		{Round: 2, Prompt: "The reviewer sent your changes back with this message:\n\nKeep the name.\n", Transcript: []byte("second \x1b[1mround\x1b[0m output\n"), Kept: true},
	}}
	test.NewTempApp(t)
	info := svc.infos[0]
	r, err := NewReviewWindow(fyne.CurrentApp(), svc, info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Window.Close)
	rt := r.rounds
	if rt.pick == nil || rt.pick.Selected != "Round 2" {
		t.Fatalf("round selector: %+v", rt.pick)
	}
	if got := rt.grid.Text(); !strings.Contains(got, "second round output") || strings.Contains(got, "first") {
		t.Errorf("round 2's transcript: %q", got)
	}
	if !rt.told.Visible() || !strings.Contains(rt.prompt.Text, "Keep the name.") {
		t.Errorf("round 2's prompt: shown %v, %q", rt.told.Visible(), rt.prompt.Text)
	}
	rt.pick.SetSelected("Round 1")
	if got := rt.grid.Text(); !strings.Contains(got, "first round output") || strings.Contains(got, "second") {
		t.Errorf("round 1's transcript: %q", got)
	}
	if rt.told.Visible() {
		t.Error("round 1 shows a prompt")
	}
}

// TestSendBackShowsTheRoundLive: the round's output shows in a terminal
// tab while it runs, on a terminal the service is given; the tab is named
// after the round once it ends.
func TestSendBackShowsTheRoundLive(t *testing.T) {
	svc := reviewService(t)
	var seen ReplyRequest
	svc.reply = func(_ context.Context, req ReplyRequest) (*pipeline.RunResult, error) {
		seen = req
		req.Progress(pipeline.Progress{Step: pipeline.StepBoot, Message: "booting"})
		fmt.Fprintf(req.Output, "agent: reading \x1b[32mthe review\x1b[0m\r\n")
		return &pipeline.RunResult{Meta: sandbox.Meta{ID: req.ID, Round: 2, Status: sandbox.StatusReady}}, nil
	}
	r := newTestReview(t, svc)
	r.SendBack("Keep the old name.")
	if seen.ID != "1a2b3c4d" || seen.Message != "Keep the old name." || seen.TTY == nil || seen.Input == nil {
		t.Fatalf("reply request %+v", seen)
	}
	live := r.rounds.live
	if live == nil || r.tabs.Selected() != live {
		t.Fatalf("the round's terminal is not in front: %+v", live)
	}
	if got := r.rounds.liveTerm.Text(); !strings.Contains(got, "agent: reading the review") {
		t.Errorf("terminal: %q", got)
	}
	if live.Text != "Round 2" {
		t.Errorf("tab %q after the round", live.Text)
	}
	if !strings.Contains(r.status.Text, "Round 2 is ready") {
		t.Errorf("status %q", r.status.Text)
	}

	// A round that fails says why in its terminal.
	svc.reply = func(_ context.Context, req ReplyRequest) (*pipeline.RunResult, error) {
		return nil, fmt.Errorf("boot: no machine")
	}
	r.SendBack("Again.")
	if got := r.rounds.liveTerm.Text(); !strings.Contains(got, "airlock: boot: no machine") || r.rounds.live.Text != "Round 2 (failed)" {
		t.Errorf("after a failed round: tab %q, terminal %q", r.rounds.live.Text, got)
	}
}
