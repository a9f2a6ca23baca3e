package gui

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

// actionsService is the review service with held actions: a GitHub
// comment (1), a label (2) and a comment sent by an earlier apply (3).
func actionsService(t *testing.T) *fakeService {
	svc := reviewService(t)
	label := githubComment(2, "")
	label.Path, label.Body = "/repos/org/repo/issues/12/labels", []byte(`{"labels":["fixed"]}`)
	sent := githubComment(3, "Looking into it.")
	sent.Send = &sandbox.SendRecord{State: sandbox.Sent, Status: 201, Body: []byte(`{"id":7}`)}
	svc.actions = map[string][]sandbox.ActionView{"1a2b3c4d": {githubComment(1, "Fixed in #14, thanks!"), label, sent}}
	svc.saved = map[string]review.Decisions{"1a2b3c4d": {Actions: map[int]review.Verdict{3: review.Approve}}}
	return svc
}

// savedActions is the verdicts on actions svc keeps for the sandbox.
func savedActions(svc *fakeService) map[int]review.Verdict {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	return svc.saved["1a2b3c4d"].Actions
}

func TestActionsListedAfterTheFiles(t *testing.T) {
	r := newTestReview(t, actionsService(t))
	n := len(r.files.list.rows)
	var got []string
	for _, row := range r.files.list.rows[n-4:] {
		got = append(got, row.id)
	}
	want := []string{actionsGroup, actionRowID(1), actionRowID(2), actionRowID(3)}
	if !slices.Equal(got, want) {
		t.Fatalf("the list ends with %q, want the group and its actions %q", got, want)
	}
	row := r.rowOf(t, actionRowID(1))
	if row.letter.Text != "POST" || row.host.Text != "api.github.com" || !strings.HasPrefix(row.label, "Comment on issue #12 of org/repo:") {
		t.Errorf("the action's row shows %q %q %q", row.letter.Text, row.label, row.host.Text)
	}
	if row := r.rowOf(t, actionsGroup); row.label != "Actions (3)" || row.partly.Text != "2 held" {
		t.Errorf("the group's row says %q, %q", row.label, row.partly.Text)
	}
	if !strings.Contains(r.files.summary.Text, "3 actions: 1 sent · 2 held") {
		t.Errorf("the summary does not count the actions: %q", r.files.summary.Text)
	}
	// Folded, the actions' rows go; selecting one opens the group.
	r.files.list.toggle(actionsGroup)
	if r.files.list.index(actionRowID(1)) >= 0 {
		t.Error("the folded group still lists its actions")
	}
	r.selectAction(2)
	if r.files.list.index(actionRowID(2)) < 0 || r.m.action != 2 {
		t.Error("selecting an action in a folded group does not show it")
	}

	// A sandbox without actions has no group.
	plain := newTestReview(t, reviewService(t))
	if plain.files.list.index(actionsGroup) >= 0 {
		t.Error("a review without actions lists an Actions group")
	}
}

func TestActionViewShowsTheRequest(t *testing.T) {
	r := newTestReview(t, actionsService(t))
	r.files.list.Select(actionRowID(1))
	if r.m.action != 1 {
		t.Fatalf("selecting the action's row shows action %d", r.m.action)
	}
	text := allText(r.diff.dv.pane)
	for _, want := range []string{
		"Comment on issue #12 of org/repo: “Fixed in #14, thanks!”",
		"/repos/org/repo/issues/12/comments",
		"api.github.com", "round 1", "held",
		"Your GITHUB_TOKEN is put in its Authorization header when it is sent",
		"Left out as credentials (never kept, so never sent): Cookie.",
		"User-Agent: gh/2.62.0",
		"{\n  \"body\": \"Fixed in #14, thanks!\"\n}",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the action view does not show %q:\n%s", want, text)
		}
	}
	// The sent one shows the answer and takes no verdict.
	r.files.list.Select(actionRowID(3))
	text = allText(r.diff.dv.pane)
	for _, want := range []string{"sent (201 Created): it cannot be taken back", `{"id":7}`} {
		if !strings.Contains(text, want) {
			t.Errorf("the sent action's view does not show %q:\n%s", want, text)
		}
	}
	for _, b := range []string{"Approve action", "Reject action"} {
		if !findButton(t, r.Window, b).Disabled() {
			t.Errorf("%s is offered on an action already sent", b)
		}
	}
	// Back to a file: its diff again.
	r.files.list.Select("src/main.go")
	if r.m.action != 0 || len(r.diff.dv.bars) == 0 {
		t.Error("selecting a file after an action does not show its diff")
	}
}

// TestActionVerdictsSavedWithFiles: a verdict on an action is saved with
// the files' verdicts, and one on a file keeps the actions'.
func TestActionVerdictsSavedWithFiles(t *testing.T) {
	svc := actionsService(t)
	r := newTestReview(t, svc)
	r.ShowFile("src/main.go")
	typeKeys(r.Window.Canvas(), "A")
	r.selectAction(1)
	test.Tap(findButton(t, r.Window, "Approve action"))
	saved := svc.saved["1a2b3c4d"]
	if saved.Actions[1] != review.Approve || saved.Actions[3] != review.Approve {
		t.Errorf("saved action verdicts %v, want 1 and 3 approved", saved.Actions)
	}
	if saved.Files["src/main.go"].Verdict != review.Approve {
		t.Errorf("approving an action took back the file's verdict: %v", saved.Files)
	}
	if got := allText(r.diff.dv.pane); !strings.Contains(got, "approved") {
		t.Errorf("the action's view does not say it is approved:\n%s", got)
	}
	// The keys: r rejects the action shown, n moves to the next.
	typeKeys(r.Window.Canvas(), "r")
	typeKeys(r.Window.Canvas(), "n")
	typeKeys(r.Window.Canvas(), "a")
	if got := savedActions(svc); got[1] != review.Reject || got[2] != review.Approve {
		t.Errorf("after r, n, a the actions are %v, want 1 rejected and 2 approved", got)
	}
	// A file's verdict afterwards keeps them.
	r.ShowFile("src/new.go")
	typeKeys(r.Window.Canvas(), "R")
	saved = svc.saved["1a2b3c4d"]
	if saved.Files["src/new.go"].Verdict != review.Reject || saved.Actions[1] != review.Reject || saved.Actions[2] != review.Approve {
		t.Errorf("after a file's verdict the review is %+v", saved)
	}
	// A sent action's verdict does not change.
	r.selectAction(3)
	typeKeys(r.Window.Canvas(), "r")
	if got := savedActions(svc); got[3] != review.Approve {
		t.Errorf("rejecting a sent action saved %v", got[3])
	}
	if !strings.Contains(r.status.Text, "a verdict changes nothing now") {
		t.Errorf("the status does not say why: %q", r.status.Text)
	}
}

// TestActionKeysWalkOnFromTheFiles: n on the last file goes on to the
// first action, p on the first action back to the last file.
func TestActionKeysWalkOnFromTheFiles(t *testing.T) {
	r := newTestReview(t, actionsService(t))
	last := r.m.files[len(r.m.files)-1]
	r.ShowFile(last.Path)
	typeKeys(r.Window.Canvas(), "n")
	if r.m.action != 1 {
		t.Fatalf("n on the last file shows action %d, want 1", r.m.action)
	}
	typeKeys(r.Window.Canvas(), "nn")
	if r.m.action != 3 {
		t.Errorf("n n shows action %d, want 3 (the last)", r.m.action)
	}
	typeKeys(r.Window.Canvas(), "ppp")
	if r.m.action != 0 || r.m.current() != last {
		t.Errorf("p from the first action shows action %d, file %v; want the last file", r.m.action, r.m.current())
	}
}

// reviewAsked is the review of svc whose Apply is pressed: the dialog
// asking whether to send, and its text.
func reviewAsked(t *testing.T, svc *fakeService) (*ReviewWindow, fyne.CanvasObject, string) {
	t.Helper()
	r := newTestReview(t, svc)
	r.promo.apply()
	top := r.Window.Canvas().Overlays().Top()
	if top == nil {
		t.Fatal("Apply with an approved action asked nothing")
	}
	return r, top, allText(top)
}

func TestApplyAsksBeforeSending(t *testing.T) {
	svc := actionsService(t)
	svc.saved["1a2b3c4d"] = review.Decisions{Files: map[string]review.FileDecision{"src/main.go": {Verdict: review.Approve}},
		Actions: map[int]review.Verdict{1: review.Approve, 2: review.Reject, 3: review.Approve}}
	r, top, text := reviewAsked(t, svc)
	if got := r.promo.applyBtn.Text; got != "Apply selected (1 file, 1 action)" {
		t.Errorf("the Apply button says %q", got)
	}
	for _, want := range []string{
		"1 approved action will be sent from this computer:",
		"Comment on issue #12 of org/repo: “Fixed in #14, thanks!”",
		"Undo cannot unsend it.",
		"The approved files are written first",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the question does not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "labels") || strings.Contains(text, "Looking into it") {
		t.Errorf("the question lists actions that are not to be sent:\n%s", text)
	}
	if w := top.MinSize().Width; w > dialogWidth+200 {
		t.Errorf("the question is %v wide", w)
	}
	tapButton(t, top, "Cancel")
	if len(svc.appliedDecisions()) != 0 || len(svc.sent()) != 0 {
		t.Errorf("Cancel applied %d and sent %v", len(svc.appliedDecisions()), svc.sent())
	}
	if r.promo.applyBtn.Disabled() {
		t.Error("Apply stays disabled after Cancel")
	}
}

func TestApplySendsApprovedActionsAfterTheFiles(t *testing.T) {
	svc := actionsService(t)
	svc.saved["1a2b3c4d"] = review.Decisions{Files: map[string]review.FileDecision{"src/main.go": {Verdict: review.Approve}},
		Actions: map[int]review.Verdict{1: review.Approve, 2: review.Reject, 3: review.Approve}}
	var order []string
	svc.applyWith = func(review.Decisions, sandbox.ApplyOptions) (*sandbox.ApplyResult, error) {
		order = append(order, "files")
		return &sandbox.ApplyResult{Result: &review.Result{Applied: []review.FileResult{{Path: "src/main.go"}}}}, nil
	}
	svc.send = func(a sandbox.Action) (sandbox.SendRecord, error) {
		order = append(order, "action "+a.Path)
		return sandbox.SendRecord{State: sandbox.Sent, Status: 201, Body: []byte(`{"id":99}`)}, nil
	}
	r, top, _ := reviewAsked(t, svc)
	tapButton(t, top, "Send")
	if want := []string{"files", "action /repos/org/repo/issues/12/comments"}; !slices.Equal(order, want) {
		t.Errorf("Apply did %q, want %q", order, want)
	}
	if got := svc.sent(); !slices.Equal(got, []int{1}) {
		t.Errorf("sent %v, want only the approved action never sent (1)", got)
	}
	results := r.Window.Canvas().Overlays().Top()
	if results == nil {
		t.Fatal("no results shown")
	}
	if text := allText(results); !strings.Contains(text, "Sent: api.github.com answered 201 Created.") {
		t.Errorf("the results do not give the answer:\n%s", text)
	}
	if !strings.Contains(r.status.Text, "Actions: 1 sent.") {
		t.Errorf("status %q", r.status.Text)
	}
	// The view follows: the action is sent, and takes no verdict.
	if v := r.m.actionView(1); v == nil || v.State() != "sent" {
		t.Errorf("action 1 is %v after sending", v)
	}
	if got := r.promo.applyBtn.Text; got != "Apply selected (1 file)" {
		t.Errorf("the Apply button says %q after sending", got)
	}
	// Undo takes the files back, and says the actions stay sent.
	r.Reload()
	r.promo.undo()
	if !strings.Contains(r.status.Text, "Actions sent stay sent: undo cannot unsend them.") {
		t.Errorf("undo says %q", r.status.Text)
	}
}

// TestApplyOnlyActions: with no file approved, Apply still sends.
func TestApplyOnlyActions(t *testing.T) {
	svc := actionsService(t)
	svc.saved["1a2b3c4d"] = review.Decisions{Actions: map[int]review.Verdict{2: review.Approve}}
	r, top, text := reviewAsked(t, svc)
	if strings.Contains(text, "files are written first") {
		t.Errorf("the question speaks of files when none is approved:\n%s", text)
	}
	if r.promo.applyBtn.Text != "Apply selected (1 action)" {
		t.Errorf("the Apply button says %q", r.promo.applyBtn.Text)
	}
	tapButton(t, top, "Send")
	if len(svc.appliedDecisions()) != 0 {
		t.Errorf("files were applied: %v", svc.appliedDecisions())
	}
	if got := svc.sent(); !slices.Equal(got, []int{2}) {
		t.Errorf("sent %v, want [2]", got)
	}
	if !strings.HasPrefix(r.status.Text, "No files to write. Actions: 1 sent.") {
		t.Errorf("status %q", r.status.Text)
	}
}

// TestApplyHeldByConflictsSendsLater: an apply held back by a conflict
// writes nothing, so nothing is sent until the conflict window writes
// the files.
func TestApplyHeldByConflictsSendsLater(t *testing.T) {
	held := heldResult(textConflict("line 1\nmine\nline 3\n"))
	svc := conflictService(t, held)
	svc.actions = actionsService(t).actions
	svc.saved = map[string]review.Decisions{"1a2b3c4d": {Files: map[string]review.FileDecision{"src/main.go": {Verdict: review.Approve}},
		Actions: map[int]review.Verdict{1: review.Approve}}}
	r, top, _ := reviewAsked(t, svc)
	tapButton(t, top, "Send")
	if got := svc.sent(); len(got) != 0 {
		t.Errorf("sent %v while the apply is held by a conflict", got)
	}
	if !strings.Contains(r.status.Text, "sent once the files are written") {
		t.Errorf("status %q", r.status.Text)
	}
	w := conflictWindowOf(t)
	findObject[*widget.RadioGroup](t, w).SetSelected("Theirs")
	test.Tap(findButton(t, w, "Apply all 3 files"))
	if got := svc.sent(); !slices.Equal(got, []int{1}) {
		t.Errorf("after the conflict window's apply, sent %v, want [1]", got)
	}
}

// TestSendFailureSaysWhatToDo: an action that fails is reported with
// its error and what to do; the next one waits behind it.
func TestSendFailureSaysWhatToDo(t *testing.T) {
	svc := actionsService(t)
	svc.saved["1a2b3c4d"] = review.Decisions{Actions: map[int]review.Verdict{1: review.Approve, 2: review.Approve}}
	svc.send = func(a sandbox.Action) (sandbox.SendRecord, error) {
		return sandbox.SendRecord{State: sandbox.NotSent}, errors.New("dial tcp: lookup api.github.com: no such host")
	}
	r, top, _ := reviewAsked(t, svc)
	tapButton(t, top, "Send")
	results := r.Window.Canvas().Overlays().Top()
	text := allText(results)
	for _, want := range []string{
		"Not sent: dial tcp: lookup api.github.com: no such host. Nothing left this computer; once that is mended, Apply sends it.",
		"Not sent yet: an action before it did not go through",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the results do not say %q:\n%s", want, text)
		}
	}
	if v := r.m.actionView(1); v.State() != "failed, not sent" {
		t.Errorf("the failed action is %q", v.State())
	}
	if r.promo.applyBtn.Disabled() {
		t.Error("Apply cannot be pressed again to retry")
	}
}

// TestHostileActionShownSafely: an action's path, headers and body with
// terminal escapes and bidi overrides, and a 1 MB body, are shown with
// their escapes visible, never raw, and widen nothing.
func TestHostileActionShownSafely(t *testing.T) {
	svc := reviewService(t)
	evil := "\x1b]0;pwned\x07\x1b[2J\u202etxt.exe\u2066\u200b\r"
	body := `{"body":"` + evil + `","pad":"` + strings.Repeat("A", 1<<20) + `"}`
	svc.actions = map[string][]sandbox.ActionView{"1a2b3c4d": {{Action: sandbox.Action{ID: 1, Round: 1, Held: egress.Held{
		Scheme: "https", Host: "hooks.example.com", Port: 8443, Method: "POST",
		Path:    "/" + strings.Repeat("very-long-segment/", 200) + evil,
		Query:   "q=" + evil,
		Header:  http.Header{"X-Note" + evil: {evil + strings.Repeat("x", 5000)}},
		Body:    []byte(body),
		Dropped: []string{"X-Token" + evil},
		Secret:  &egress.HeldSecret{Name: "HOOK\u202eKEY", Header: "X-Api-Key"},
	}}}}}
	start := time.Now()
	r := newTestReview(t, svc)
	r.selectAction(1)
	test.RenderToMarkup(r.Window.Canvas())
	if d := time.Since(start); d > 20*time.Second {
		t.Logf("the hostile action took %v to show", d) // not asserted: machines differ
	}
	texts := allText(r.Window.Content())
	for _, row := range findAll[*fileRow](r.Window) {
		texts += row.label + row.name.Text + row.host.Text + row.letter.Text
	}
	for _, bad := range hiddenRunes {
		if strings.Contains(texts, bad) {
			t.Errorf("the action is shown with %q raw", bad)
		}
	}
	for _, want := range []string{`\x1b]0;pwned\x07\x1b[2J<U+202E>txt.exe`, "hooks.example.com:8443"} {
		if !strings.Contains(texts, want) {
			t.Errorf("the action view does not show %q", want)
		}
	}
	if w := r.Window.Content().MinSize().Width; w > 1100 {
		t.Errorf("the action widens the review window to %v px", w)
	}
	if len(texts) > 4<<20 {
		t.Errorf("the window holds %d bytes of the action: the body is not cut", len(texts))
	}
	// The question before sending is as safe, and as narrow.
	r.m.setAction(1, true)
	r.refresh()
	r.promo.apply()
	top := r.Window.Canvas().Overlays().Top()
	text := allText(top)
	for _, bad := range hiddenRunes {
		if strings.Contains(text, bad) {
			t.Errorf("the question shows %q raw", bad)
		}
	}
	if w := top.MinSize().Width; w > dialogWidth+200 {
		t.Errorf("the question is %v wide", w)
	}
}

// allText is the text of every label under o, a line each: plain,
// fitted and cut ones.
func allText(o fyne.CanvasObject) string {
	var b strings.Builder
	for _, x := range test.LaidOutObjects(o) {
		switch w := x.(type) {
		case *widget.Label:
			b.WriteString(w.Text + "\n")
		case *tipLabel:
			b.WriteString(w.Text + "\n" + w.tip.text + "\n")
		case *fitLabel:
			b.WriteString(w.Text + "\n")
		}
	}
	return b.String()
}

// TestRowClickSelects: a click on a row selects it. The desktop driver
// gives a click to the innermost widget taking either button's taps: the
// row itself, which takes right clicks, so it must take left ones too.
func TestRowClickSelects(t *testing.T) {
	r := newTestReview(t, actionsService(t))
	var row fyne.CanvasObject = r.rowOf(t, actionRowID(2))
	tap, ok := row.(fyne.Tappable)
	if !ok {
		t.Fatal("a row takes right clicks but not left ones: a click on it would select nothing")
	}
	tap.Tapped(&fyne.PointEvent{})
	if r.m.action != 2 {
		t.Errorf("a click on action 2's row shows action %d", r.m.action)
	}
	if r.Window.Canvas().Focused() != r.files.list {
		t.Error("the list does not take the focus when its row is clicked")
	}
	r.rowOf(t, "src/new.go").Tapped(&fyne.PointEvent{})
	if r.m.action != 0 || r.m.current().Path != "src/new.go" {
		t.Errorf("a click on a file's row shows action %d, file %s", r.m.action, r.m.current().Path)
	}
}

// TestActionsWithoutFiles: a sandbox whose agent changed no file but
// made held requests opens on its first action.
func TestActionsWithoutFiles(t *testing.T) {
	svc := actionsService(t)
	svc.changesets["1a2b3c4d"] = testObjects{}.changeset(t, nil)
	r := newTestReview(t, svc)
	if r.m.action != 1 {
		t.Fatalf("the review opens on action %d, want 1", r.m.action)
	}
	typeKeys(r.Window.Canvas(), "pan")
	if got := savedActions(svc); got[1] != review.Approve || r.m.action != 2 {
		t.Errorf("p, a, n: actions %v, shown %d", got, r.m.action)
	}
}

// TestActionRowMenu: a right click on an action's row approves or
// rejects it.
func TestActionRowMenu(t *testing.T) {
	svc := actionsService(t)
	r := newTestReview(t, svc)
	r.rowOf(t, actionRowID(2)).TappedSecondary(&fyne.PointEvent{})
	if items := openMenu(t, r.Window.Canvas()); !items["Approve action"] || !items["Reject action"] {
		t.Fatalf("the row's menu offers %v", items)
	}
	tapMenu(t, r.Window.Canvas(), "Reject action")
	if got := savedActions(svc); got[2] != review.Reject {
		t.Errorf("the menu's Reject saved %v", got)
	}
}
