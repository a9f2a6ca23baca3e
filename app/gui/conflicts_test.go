package gui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

func projectState(data string) review.EntryState {
	sum := sha256.Sum256([]byte(data))
	return review.EntryState{Exists: true, Type: manifest.File, Mode: 0o644, SHA256: hex.EncodeToString(sum[:])}
}

// textConflict is src/main.go changed on line 2 by both sides.
func textConflict(ours string) *review.ConflictError {
	base, theirs := "line 1\nline 2\nline 3\n", "line 1\nline two\nline 3\n"
	return &review.ConflictError{Path: "src/main.go", File: "src/main.go",
		Reason: "your edits since the run overlap the approved change (1 conflicting stretch)",
		Base:   []byte(base), Ours: []byte(ours), Theirs: []byte(theirs),
		Merge:   review.Merge3([]byte(base), []byte(ours), []byte(theirs)),
		Project: projectState(ours), Approved: projectState(theirs)}
}

// heldResult is an all-or-nothing apply that wrote nothing: src/main.go
// conflicts, two files held back.
func heldResult(c *review.ConflictError) *sandbox.ApplyResult {
	return &sandbox.ApplyResult{Result: &review.Result{Held: true, Conflicts: []*review.ConflictError{c},
		Withheld: []review.FileResult{{Path: "src/new.go"}, {Path: "old.txt"}}}}
}

// conflictService answers the first apply with held and every apply with
// resolutions with them applied.
func conflictService(t *testing.T, held *sandbox.ApplyResult) *fakeService {
	svc := reviewService(t)
	svc.applyWith = func(d review.Decisions, opts sandbox.ApplyOptions) (*sandbox.ApplyResult, error) {
		if len(opts.Resolutions) == 0 {
			return held, nil
		}
		res := &review.Result{JournalDir: "/x/applies/001"}
		for p, r := range opts.Resolutions {
			res.Resolved = append(res.Resolved, review.FileResult{Path: p, Resolution: r.Choice})
		}
		return &sandbox.ApplyResult{Result: res}, nil
	}
	return svc
}

func newTestConflicts(t *testing.T, svc *fakeService, res *sandbox.ApplyResult) *ConflictWindow {
	t.Helper()
	test.NewTempApp(t)
	w := NewConflictWindow(fyne.CurrentApp(), svc, "1a2b3c4d", review.ApproveAll(svc.changesets["1a2b3c4d"]), res)
	w.async = syncNow
	t.Cleanup(func() {
		// The window closes itself once everything is applied.
		for _, open := range fyne.CurrentApp().Driver().AllWindows() {
			if open == w.Window {
				w.Window.Close()
			}
		}
	})
	return w
}

func gridText(g *widget.TextGrid) string {
	var b strings.Builder
	for _, r := range g.Rows {
		for _, c := range r.Cells {
			b.WriteRune(c.Rune)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestApplyOpensTheConflictWindow: the review window's Apply is all or
// nothing; a conflict opens the conflict window, which shows both sides,
// and nothing was written.
func TestApplyOpensTheConflictWindow(t *testing.T) {
	svc := conflictService(t, heldResult(textConflict("line 1\nmine\nline 3\n")))
	r := newTestReview(t, svc)
	r.m.setAll(true)
	r.refresh()
	test.Tap(r.promo.applyBtn)
	if len(svc.applyOpts) != 1 || !svc.applyOpts[0].AllOrNothing {
		t.Fatalf("apply options %+v, want one all-or-nothing apply", svc.applyOpts)
	}
	if !strings.Contains(r.status.Text, "Nothing written yet: 1 file conflicts") {
		t.Errorf("review status %q", r.status.Text)
	}
	if !r.promo.applyBtn.Disabled() {
		t.Error("Apply stays enabled while the conflicts are open")
	}
	w := conflictWindowOf(t)
	markup := test.RenderToMarkup(w.Canvas())
	for _, want := range []string{"Your project now", "The approved change", "nothing has been written yet",
		"Apply the other 2 files only", "Choose for 1 more file."} {
		if !strings.Contains(markup, want) {
			t.Errorf("the conflict window does not show %q", want)
		}
	}
	var shown strings.Builder
	for _, g := range findAll[*widget.TextGrid](w) {
		shown.WriteString(gridText(g))
	}
	if !strings.Contains(shown.String(), "mine") || !strings.Contains(shown.String(), "line two") {
		t.Errorf("the sides do not show the two versions:\n%s", shown.String())
	}
	// The whole flow through the window's own widgets: Theirs, Apply.
	radio := findObject[*widget.RadioGroup](t, w)
	radio.SetSelected("Theirs")
	apply := findButton(t, w, "Apply all 3 files")
	test.Tap(apply)
	if len(svc.applyOpts) != 2 {
		t.Fatalf("apply options %+v", svc.applyOpts)
	}
	got := svc.applyOpts[1]
	seen := projectState("line 1\nmine\nline 3\n")
	want := sandbox.ApplyOptions{AllOrNothing: true, Resolutions: map[string]review.Resolution{"src/main.go": {Choice: review.TakeTheirs, Seen: &seen}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolution apply (-want +got):\n%s", diff)
	}
	if ds := svc.appliedDecisions(); len(ds[1].Files) != len(ds[0].Files) {
		t.Errorf("the resolution apply did not take every approved file: %v", ds[1])
	}
	if !strings.Contains(r.status.Text, "Done") || r.promo.applyBtn.Disabled() {
		t.Errorf("after the resolution: status %q, apply disabled %v", r.status.Text, r.promo.applyBtn.Disabled())
	}
}

// conflictWindowOf finds the open conflict window.
func conflictWindowOf(t *testing.T) fyne.Window {
	t.Helper()
	for _, w := range fyne.CurrentApp().Driver().AllWindows() {
		if strings.HasPrefix(w.Title(), "Conflicts") {
			return w
		}
	}
	t.Fatal("no conflict window")
	return nil
}

func findObject[T fyne.CanvasObject](t *testing.T, w fyne.Window) T {
	t.Helper()
	for _, o := range test.LaidOutObjects(w.Content()) {
		if v, ok := o.(T); ok {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T in %s", zero, w.Title())
	return zero
}

func findAll[T fyne.CanvasObject](w fyne.Window) []T {
	var out []T
	for _, o := range test.LaidOutObjects(w.Content()) {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func findButton(t *testing.T, w fyne.Window, text string) *widget.Button {
	t.Helper()
	for _, o := range test.LaidOutObjects(w.Content()) {
		if b, ok := o.(*widget.Button); ok && b.Text == text {
			return b
		}
	}
	t.Fatalf("no button %q", text)
	return nil
}

func TestConflictChoicesShowTheirResult(t *testing.T) {
	c := textConflict("line 1\nmine\nline 3\n")
	w := newTestConflicts(t, reviewService(t), heldResult(c))
	if !w.applyBtn.Disabled() {
		t.Error("Apply is enabled before a choice")
	}
	if diff := cmp.Diff([]string{"Mine", "Theirs", "Both"}, w.choice.Options); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		choice review.Choice
		want   string
	}{
		{review.KeepMine, "line 1\nmine\nline 3\n"},
		{review.TakeTheirs, "line 1\nline two\nline 3\n"},
		{review.KeepBoth, "line 1\nmine\nline two\nline 3\n"},
	} {
		w.Choose("src/main.go", tt.choice)
		if got := gridText(w.result); got != tt.want {
			t.Errorf("%s: result %q, want %q", tt.choice, got, tt.want)
		}
	}
	// Both marks each side's stretch in its colour.
	if w.result.Rows[1].Style == nil || w.result.Rows[2].Style == nil || w.result.Rows[0].Style != nil {
		t.Errorf("both: the stretches are not marked: %v", w.result.Rows)
	}
	if w.applyBtn.Disabled() || w.applyBtn.Text != "Apply all 3 files" {
		t.Errorf("apply button %q disabled=%v", w.applyBtn.Text, w.applyBtn.Disabled())
	}
}

// One file in all says so: not "Apply all 1 files".
func TestConflictApplyOneFile(t *testing.T) {
	res := &sandbox.ApplyResult{Result: &review.Result{Held: true, Conflicts: []*review.ConflictError{textConflict("line 1\nmine\nline 3\n")}}}
	w := newTestConflicts(t, reviewService(t), res)
	w.Choose("src/main.go", review.KeepBoth)
	if w.applyBtn.Disabled() || w.applyBtn.Text != "Apply the file" {
		t.Errorf("apply button %q disabled=%v", w.applyBtn.Text, w.applyBtn.Disabled())
	}
}

func TestConflictMergeToolResultIsShownThenWritten(t *testing.T) {
	svc := conflictService(t, nil)
	var given *review.ConflictError
	svc.mergeTool = func(c *review.ConflictError) ([]byte, error) {
		given = c
		return []byte("line 1\nmerged by hand\nline 3\n"), nil
	}
	c := textConflict("line 1\nmine\nline 3\n")
	w := newTestConflicts(t, svc, heldResult(c))
	test.Tap(w.toolBtn)
	if given != c {
		t.Fatalf("the tool was given %v", given)
	}
	if got := gridText(w.result); got != "line 1\nmerged by hand\nline 3\n" {
		t.Errorf("result %q", got)
	}
	if w.choice.Selected != "Merge tool" || len(svc.applyOpts) != 0 {
		t.Errorf("selected %q, applies %d: the tool's result must be shown, not written", w.choice.Selected, len(svc.applyOpts))
	}
	test.Tap(w.applyBtn)
	r := svc.applyOpts[0].Resolutions["src/main.go"]
	if r.Choice != review.UseContent || string(r.Content) != "line 1\nmerged by hand\nline 3\n" {
		t.Errorf("resolution %+v", r)
	}
}

func TestConflictWithoutMergeToolSaysHowToSetOne(t *testing.T) {
	w := newTestConflicts(t, reviewService(t), heldResult(textConflict("line 1\nmine\nline 3\n")))
	test.Tap(w.toolBtn)
	if !strings.Contains(w.status.Text, "merge_tool") {
		t.Errorf("status %q", w.status.Text)
	}
	if markup := test.RenderToMarkup(w.Window.Canvas()); !strings.Contains(markup, "config.toml") {
		t.Error("no word of config.toml")
	}
}

// TestConflictChangedAgain: the file changed after the user chose; the
// apply writes nothing, the window shows the new version and asks again.
func TestConflictChangedAgain(t *testing.T) {
	svc := reviewService(t)
	again := textConflict("line 1\nmine, edited again\nline 3\n")
	again.Again, again.Reason = true, "it changed in the project again since you chose how to resolve it"
	svc.applyWith = func(review.Decisions, sandbox.ApplyOptions) (*sandbox.ApplyResult, error) {
		return heldResult(again), nil
	}
	w := newTestConflicts(t, svc, heldResult(textConflict("line 1\nmine\nline 3\n")))
	w.Choose("src/main.go", review.TakeTheirs)
	test.Tap(w.applyBtn)
	if !strings.Contains(w.status.Text, "src/main.go changed again") {
		t.Errorf("status %q", w.status.Text)
	}
	if _, ok := w.chosen["src/main.go"]; ok || !w.applyBtn.Disabled() || w.choice.Selected != "" {
		t.Error("the choice made on the old version is kept")
	}
	if got := gridText(w.mine); !strings.Contains(got, "mine, edited again") {
		t.Errorf("your side still shows the old version: %q", got)
	}
}

// TestConflictApplyOthersFirst: the user chooses to write the files that
// do not conflict; the conflicting one is then resolved alone.
func TestConflictApplyOthersFirst(t *testing.T) {
	svc := reviewService(t)
	c := textConflict("line 1\nmine\nline 3\n")
	svc.applyWith = func(d review.Decisions, opts sandbox.ApplyOptions) (*sandbox.ApplyResult, error) {
		if len(opts.Resolutions) == 0 {
			return &sandbox.ApplyResult{Result: &review.Result{Applied: []review.FileResult{{Path: "src/new.go"}}, Conflicts: []*review.ConflictError{c}}}, nil
		}
		return &sandbox.ApplyResult{Result: &review.Result{Resolved: []review.FileResult{{Path: "src/main.go", Resolution: review.KeepBoth}}}}, nil
	}
	w := newTestConflicts(t, svc, heldResult(c))
	var told []*sandbox.ApplyResult
	w.onApply = func(res *sandbox.ApplyResult) { told = append(told, res) }
	test.Tap(w.othersBtn)
	if svc.applyOpts[0].AllOrNothing || len(told) != 1 || !w.written || w.othersBtn.Visible() {
		t.Fatalf("apply the others: opts %+v, told %d, written %v", svc.applyOpts[0], len(told), w.written)
	}
	w.Choose("src/main.go", review.KeepBoth)
	if w.applyBtn.Text != "Apply the resolution" {
		t.Errorf("apply button %q", w.applyBtn.Text)
	}
	test.Tap(w.applyBtn)
	ds := svc.appliedDecisions()
	if len(ds) != 2 || len(ds[1].Files) != 1 || ds[1].Files["src/main.go"].Verdict != review.Approve {
		t.Errorf("the resolution apply took %v, want src/main.go alone", ds[len(ds)-1])
	}
	if len(told) != 2 {
		t.Errorf("the review window was told of %d applies", len(told))
	}
}

// TestConflictHostileContent: the guest's path and content are shown with
// their control characters made visible.
func TestConflictHostileContent(t *testing.T) {
	c := textConflict("line 1\nmine\x1b[2J\nline 3\n")
	c.Path = "src/\x1b]0;evil\x07main.go"
	c.Theirs = []byte("line 1\nline\u202etwo\nline 3\n")
	c.Merge = review.Merge3(c.Base, c.Ours, c.Theirs)
	w := newTestConflicts(t, reviewService(t), heldResult(c))
	for _, s := range []string{w.path.Text, gridText(w.mine), gridText(w.theirs)} {
		if strings.ContainsAny(s, "\x1b\x07\u202e") {
			t.Errorf("shown raw: %q", s)
		}
	}
}

func TestConflictNonText(t *testing.T) {
	c := &review.ConflictError{Path: "logo.png", Reason: "you changed it in the project since the run, and it cannot be merged line by line",
		Ours: []byte("\x89PNG\x00mine"), Theirs: []byte("\x89PNG\x00agent"), Project: projectState("\x89PNG\x00mine"), Approved: projectState("\x89PNG\x00agent")}
	gone := &review.ConflictError{Path: "old.txt", Reason: "you changed it in the project since the run, and the approved change removes it",
		Ours: []byte("kept\n"), Project: projectState("kept\n")}
	res := heldResult(c)
	res.Conflicts = append(res.Conflicts, gone)
	w := newTestConflicts(t, reviewService(t), res)
	if diff := cmp.Diff([]string{"Mine", "Theirs"}, w.choice.Options); diff != "" {
		t.Errorf("binary options (-want +got):\n%s", diff)
	}
	if got := gridText(w.mine); got != "(a binary file of 9 bytes)\n" {
		t.Errorf("binary side %q", got)
	}
	w.Choose("old.txt", review.TakeTheirs)
	if got := gridText(w.result); got != "(no file: the approved change removes it)\n" {
		t.Errorf("theirs of a removal: %q", got)
	}
	if w.applyBtn.Text != "Apply" || !w.applyBtn.Disabled() {
		t.Errorf("apply with one file left: %q", w.applyBtn.Text)
	}
}

// storedConflict records a sandbox without a VM whose agent changed line
// 2 of a.txt and added b.txt, in a project where the user changed line 2
// of a.txt since: a real conflict for the real store.
func storedConflict(t *testing.T) (svc *StoreService, info sandbox.Info, project string) {
	t.Helper()
	store, err := sandbox.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	project = t.TempDir()
	encode := func(files map[string]string) []byte {
		m := &manifest.Manifest{}
		for _, p := range slices.Sorted(maps.Keys(files)) {
			sum, size, err := store.Objects().Put(strings.NewReader(files[p]))
			if err != nil {
				t.Fatal(err)
			}
			m.Entries = append(m.Entries, manifest.Entry{Path: p, Type: manifest.File, Mode: 0o644, Size: size, SHA256: sum})
		}
		var b bytes.Buffer
		if err := m.Encode(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	sb, err := store.Create(sandbox.Meta{Project: project})
	if err != nil {
		t.Fatal(err)
	}
	write := func(p string, data []byte) {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(sb.Path(sandbox.BaselineFile), encode(map[string]string{"a.txt": "one\ntwo\nthree\n"}))
	write(sb.Path(sandbox.GuestFile), encode(map[string]string{"a.txt": "one\nagent two\nthree\n", "b.txt": "new\n"}))
	m, err := sb.Update(func(m *sandbox.Meta) {
		m.Baseline, m.Guest, m.Status = sandbox.BaselineFile, sandbox.GuestFile, sandbox.StatusReady
	})
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(project, "a.txt"), []byte("one\nmy two\nthree\n"))
	return &StoreService{Store: store}, sandbox.Info{Meta: m}, project
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		data, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[de.Name()] = string(data)
	}
	return out
}

// TestConflictResolvedOverTheRealStore: through the real store, the
// review window's Apply writes nothing when a file conflicts; "Theirs" in
// the conflict window writes the agent's version byte for byte with the
// rest; Undo restores the project byte for byte.
func TestConflictResolvedOverTheRealStore(t *testing.T) {
	svc, info, project := storedConflict(t)
	before := readTree(t, project)
	test.NewTempApp(t)
	r, err := NewReviewWindow(fyne.CurrentApp(), svc, info)
	if err != nil {
		t.Fatal(err)
	}
	r.async = syncNow
	t.Cleanup(r.Window.Close)
	r.m.setAll(true)
	r.refresh()
	test.Tap(r.promo.applyBtn)
	if diff := cmp.Diff(before, readTree(t, project)); diff != "" {
		t.Fatalf("the conflicting apply wrote (-before +after):\n%s", diff)
	}
	w := conflictWindowOf(t)
	findObject[*widget.RadioGroup](t, w).SetSelected("Theirs")
	test.Tap(findButton(t, w, "Apply all 2 files"))
	want := map[string]string{"a.txt": "one\nagent two\nthree\n", "b.txt": "new\n"}
	if diff := cmp.Diff(want, readTree(t, project)); diff != "" {
		t.Errorf("after Theirs (-want +got):\n%s", diff)
	}
	if _, err := svc.Undo(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, readTree(t, project)); diff != "" {
		t.Errorf("after undo (-before +after):\n%s", diff)
	}
}

// TestConflictMergeToolOverTheRealStore runs a fake merge tool script
// through the real store: its result is written, and only after Apply.
func TestConflictMergeToolOverTheRealStore(t *testing.T) {
	svc, info, project := storedConflict(t)
	tool := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\nprintf 'one\\ntool two\\nthree\\n' >\"$2\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	svc.Store.MergeTool = func() ([]string, error) { return []string{tool, "$MINE", "$OUTPUT"}, nil }
	res, err := svc.ApplyWith(context.Background(), info.ID, review.Decisions{Files: map[string]review.FileDecision{"a.txt": {Verdict: review.Approve}}}, sandbox.ApplyOptions{AllOrNothing: true})
	if err != nil || !res.Held {
		t.Fatalf("%v %+v", err, res)
	}
	test.NewTempApp(t)
	w := NewConflictWindow(fyne.CurrentApp(), svc, info.ID, review.Decisions{Files: map[string]review.FileDecision{"a.txt": {Verdict: review.Approve}}}, res)
	w.async = syncNow
	test.Tap(w.toolBtn)
	if got := gridText(w.result); got != "one\ntool two\nthree\n" {
		t.Fatalf("result %q (status %q)", got, w.status.Text)
	}
	if got := readTree(t, project)["a.txt"]; got != "one\nmy two\nthree\n" {
		t.Errorf("written before Apply: %q", got)
	}
	test.Tap(w.applyBtn)
	if got := readTree(t, project)["a.txt"]; got != "one\ntool two\nthree\n" {
		t.Errorf("after Apply: %q", got)
	}
}

// TestConflictResultShowsTheStretch: the result pane opens at the
// conflicting stretch, not at the top of a long file.
func TestConflictResultShowsTheStretch(t *testing.T) {
	var base strings.Builder
	for i := 1; i <= 80; i++ {
		fmt.Fprintf(&base, "line %d\n", i)
	}
	ours := strings.Replace(base.String(), "line 60\n", "mine 60\n", 1)
	theirs := strings.Replace(base.String(), "line 60\n", "theirs 60\n", 1)
	c := &review.ConflictError{Path: "long.txt", Reason: "overlap", Base: []byte(base.String()), Ours: []byte(ours), Theirs: []byte(theirs),
		Merge: review.Merge3([]byte(base.String()), []byte(ours), []byte(theirs)), Project: projectState(ours), Approved: projectState(theirs)}
	w := newTestConflicts(t, reviewService(t), heldResult(c))
	w.Choose("long.txt", review.KeepBoth)
	if w.resultScroll.Offset.Y < 400 {
		t.Errorf("the result is scrolled to %v, not to line 60", w.resultScroll.Offset)
	}
}

func TestConflictKeys(t *testing.T) {
	res := heldResult(textConflict("line 1\nmine\nline 3\n"))
	bin := &review.ConflictError{Path: "logo.png", Reason: "cannot be merged line by line",
		Ours: []byte("\x00a"), Theirs: []byte("\x00b"), Project: projectState("\x00a"), Approved: projectState("\x00b")}
	res.Conflicts = append(res.Conflicts, bin)
	w := newTestConflicts(t, reviewService(t), res)
	c := w.Window.Canvas()
	c.OnTypedRune()('b')
	c.OnTypedRune()('n')
	c.OnTypedRune()('b') // both does not fit a binary file
	if w.cur != 1 || w.choice.Selected != "" {
		t.Errorf("after b on a binary file: file %d, selected %q", w.cur, w.choice.Selected)
	}
	c.OnTypedRune()('t')
	want := map[string]review.Choice{"src/main.go": review.KeepBoth, "logo.png": review.TakeTheirs}
	got := map[string]review.Choice{}
	for p, r := range w.chosen {
		got[p] = r.Choice
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
	c.OnTypedKey()(&fyne.KeyEvent{Name: fyne.KeyEscape})
	for _, open := range fyne.CurrentApp().Driver().AllWindows() {
		if open == w.Window {
			t.Error("Escape did not close the window")
		}
	}
}
