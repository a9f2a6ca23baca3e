package gui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/color"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// Colours of the two sides of a conflict, in the sides and in the result.
var (
	mineBG   = color.NRGBA{0x38, 0x8b, 0xfd, 0x33}
	theirsBG = color.NRGBA{0xd2, 0x99, 0x22, 0x38}
)

// The choices as the window names them, and what each does.
var choiceNames = map[review.Choice]string{
	review.KeepMine:   "Mine",
	review.TakeTheirs: "Theirs",
	review.KeepBoth:   "Both",
	review.UseContent: "Merge tool",
}

var choiceHelp = map[review.Choice]string{
	review.KeepMine:   "Mine: your project's version is kept exactly as it is.",
	review.TakeTheirs: "Theirs: the approved change is written over your version.",
	review.KeepBoth:   "Both: each conflicting stretch keeps your lines, then the approved change's.",
	review.UseContent: "Merge tool's result: what your merge tool saved is written.",
}

// ConflictWindow resolves the files an apply found in conflict with the
// user's edits since the run: for each, the two sides, a choice (mine,
// theirs, both, or a merge tool's result) and the result it writes. Its
// Apply writes everything in one apply (one journal: Undo reverts it
// whole) and only once every file has a choice; "Apply the others only"
// writes the files that do not conflict, if the user wants that instead.
type ConflictWindow struct {
	Window fyne.Window
	svc    ConflictService
	id     string
	// d is the apply's decisions; written is set once the files that do
	// not conflict were written, so that Apply takes the conflicting
	// files only.
	d         review.Decisions
	written   bool
	conflicts []*review.ConflictError
	withheld  int
	// chosen holds the user's answer per conflict path; tool the merge
	// tool's result per path, once run.
	chosen map[string]review.Resolution
	tool   map[string][]byte
	cur    int

	intro   *widget.Label
	list    *widget.List
	path    *widget.Label
	reason  *widget.Label
	choice  *widget.RadioGroup
	help    *widget.Label
	toolBtn *widget.Button
	mine    *widget.TextGrid
	theirs  *widget.TextGrid
	result  *widget.TextGrid
	// The panes' scrolls, moved to the first conflicting stretch.
	mineScroll, theirsScroll, resultScroll *container.Scroll
	resultHead                             *widget.Label
	status                                 *widget.Label
	applyBtn                               *widget.Button
	othersBtn                              *widget.Button

	// async runs applies and the merge tool off fyne's goroutine.
	async func(func())
	// onApply, if set, is told of each apply that wrote something.
	onApply func(*sandbox.ApplyResult)
}

// NewConflictWindow builds the window for the conflicts of res, an apply
// of sandbox id with decisions d (not shown). res.Held says whether
// nothing was written yet.
func NewConflictWindow(a fyne.App, svc ConflictService, id string, d review.Decisions, res *sandbox.ApplyResult) *ConflictWindow {
	w := &ConflictWindow{svc: svc, id: id, d: d, written: !res.Held, chosen: map[string]review.Resolution{}, tool: map[string][]byte{}, async: goAsync}
	w.conflicts, w.withheld = res.Conflicts, len(res.Withheld)
	w.Window = a.NewWindow("Conflicts: sandbox " + id)
	w.build()
	w.Window.Resize(fyne.NewSize(1100, 720))
	w.show(0)
	w.installKeys()
	return w
}

// installKeys: m, t, b choose mine, theirs or both for the shown file; n
// and p show the next and previous file; Escape closes the window (the
// window has no text box, so the keys always work).
func (w *ConflictWindow) installKeys() {
	c := w.Window.Canvas()
	c.SetOnTypedRune(func(r rune) {
		if len(w.conflicts) == 0 {
			return
		}
		switch r {
		case 'm', 't', 'b':
			ch := map[rune]review.Choice{'m': review.KeepMine, 't': review.TakeTheirs, 'b': review.KeepBoth}[r]
			if slices.Contains(w.conflicts[w.cur].Choices(), ch) {
				w.choice.SetSelected(choiceNames[ch])
			}
		case 'n':
			w.show(w.cur + 1)
		case 'p':
			w.show(w.cur - 1)
		}
	})
	c.SetOnTypedKey(func(k *fyne.KeyEvent) {
		if k.Name == fyne.KeyEscape {
			w.Window.Close()
		}
	})
}

func (w *ConflictWindow) build() {
	w.intro = widget.NewLabel("")
	w.intro.Wrapping = fyne.TextWrapWord
	w.list = widget.NewList(func() int { return len(w.conflicts) },
		func() fyne.CanvasObject {
			l := widget.NewLabel("path")
			l.Truncation = fyne.TextTruncateEllipsis
			return container.NewBorder(nil, nil, widget.NewIcon(theme.QuestionIcon()), nil, l)
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			box := o.(*fyne.Container)
			label, icon := box.Objects[0].(*widget.Label), box.Objects[1].(*widget.Icon)
			c := w.conflicts[i]
			text := safetext.Line(c.Path)
			if r, ok := w.chosen[c.Path]; ok {
				text += ": " + strings.ToLower(choiceNames[r.Choice])
				icon.SetResource(theme.ConfirmIcon())
			} else {
				icon.SetResource(theme.QuestionIcon())
			}
			label.SetText(text)
		})
	w.list.OnSelected = func(i widget.ListItemID) {
		if i != w.cur {
			w.show(i)
		}
	}

	w.path = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	w.path.Truncation = fyne.TextTruncateEllipsis
	w.reason = widget.NewLabel("")
	w.reason.Wrapping = fyne.TextWrapWord
	w.choice = widget.NewRadioGroup(nil, w.choose)
	w.choice.Horizontal = true
	w.toolBtn = widget.NewButtonWithIcon("Open in merge tool…", theme.DocumentCreateIcon(), w.runTool)
	w.help = widget.NewLabel("")
	w.help.Truncation = fyne.TextTruncateEllipsis
	keys := widget.NewLabelWithStyle("Keys: m mine · t theirs · b both · n/p file · Esc close", fyne.TextAlignTrailing, fyne.TextStyle{Italic: true})
	keys.Truncation = fyne.TextTruncateEllipsis

	// The grids do not scroll themselves: their scrolls are moved to
	// the conflicting stretches.
	grid := func() (*widget.TextGrid, *container.Scroll) {
		g := widget.NewTextGrid()
		g.Scroll = fyne.ScrollNone
		return g, container.NewScroll(container.NewPadded(g))
	}
	w.mine, w.mineScroll = grid()
	w.theirs, w.theirsScroll = grid()
	w.result, w.resultScroll = grid()
	side := func(title string, bg color.Color, scroll *container.Scroll) fyne.CanvasObject {
		head := widget.NewLabelWithStyle(title, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		head.Truncation = fyne.TextTruncateEllipsis
		return container.NewBorder(container.NewBorder(nil, nil, swatch(bg), nil, head), nil, nil, nil, wheelScroll(scroll))
	}
	w.resultHead = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	w.resultHead.Truncation = fyne.TextTruncateEllipsis
	sides := container.NewHSplit(side("Your project now", mineBG, w.mineScroll), side("The approved change", theirsBG, w.theirsScroll))
	result := container.NewBorder(w.resultHead, nil, nil, nil, wheelScroll(w.resultScroll))
	panes := container.NewVSplit(sides, result)
	panes.Offset = 0.45
	head := container.NewVBox(container.NewGridWithColumns(2, w.path, keys), w.reason, container.NewBorder(nil, nil, nil, w.toolBtn, container.NewHScroll(w.choice)), w.help)
	file := container.NewBorder(head, nil, nil, nil, panes)

	split := container.NewHSplit(container.NewBorder(widget.NewLabelWithStyle("Files in conflict", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), nil, nil, nil, wheelList(w.list)), file)
	split.Offset = 0.25

	w.status = widget.NewLabel("")
	w.status.Truncation = fyne.TextTruncateEllipsis
	cancel := widget.NewButton("Close", w.Window.Close)
	w.othersBtn = widget.NewButton("Apply the others only", w.applyOthers)
	w.applyBtn = widget.NewButtonWithIcon("Apply", theme.ConfirmIcon(), w.apply)
	w.applyBtn.Importance = widget.HighImportance
	bar := container.NewBorder(nil, nil, nil, container.NewHBox(cancel, w.othersBtn, w.applyBtn), w.status)
	w.Window.SetContent(container.NewBorder(w.intro, container.NewVBox(widget.NewSeparator(), bar), nil, nil, split))
	w.redraw()
}

// swatch is a small square of the colour that marks a side.
func swatch(c color.Color) fyne.CanvasObject {
	g := widget.NewTextGrid()
	g.SetText("  ")
	g.SetRowStyle(0, &widget.CustomTextGridStyle{BGColor: c})
	return container.NewCenter(g)
}

// redraw updates what depends on the whole set: the intro, the list and
// the buttons.
func (w *ConflictWindow) redraw() {
	n := len(w.conflicts)
	files := plural(n, "1 file conflicts", fmt.Sprintf("%d files conflict", n))
	switch {
	case w.written:
		w.intro.SetText(files + " with your edits since the run and " + plural(n, "was", "were") + " left as " + plural(n, "it is", "they are") +
			" (the other approved files are written). Choose for each, then Apply; Close leaves them as they are.")
		w.othersBtn.Hide()
	default:
		w.intro.SetText(files + " with your edits since the run, so nothing has been written yet: the apply is all or nothing. " +
			"Choose for each file, then Apply writes everything approved at once.")
		if w.withheld > 0 {
			w.othersBtn.SetText(fmt.Sprintf("Apply the other %s only", plural(w.withheld, "file", fmt.Sprintf("%d files", w.withheld))))
			w.othersBtn.Show()
		} else {
			w.othersBtn.Hide()
		}
	}
	left := 0
	for _, c := range w.conflicts {
		if _, ok := w.chosen[c.Path]; !ok {
			left++
		}
	}
	if left == 0 && strings.HasPrefix(w.status.Text, "Choose") {
		w.status.SetText("Every file has a choice. Nothing is written until you press Apply.")
	}
	switch {
	case left > 0:
		w.applyBtn.Disable()
		w.applyBtn.SetText("Apply")
		if w.status.Text == "" || strings.HasPrefix(w.status.Text, "Choose") {
			w.status.SetText(fmt.Sprintf("Choose for %s.", plural(left, "1 more file", fmt.Sprintf("%d more files", left))))
		}
	case w.written:
		w.applyBtn.Enable()
		w.applyBtn.SetText(fmt.Sprintf("Apply %s", plural(n, "the resolution", fmt.Sprintf("the %d resolutions", n))))
	default:
		w.applyBtn.Enable()
		w.applyBtn.SetText(plural(n+w.withheld, "Apply the file", fmt.Sprintf("Apply all %d files", n+w.withheld)))
	}
	w.list.Refresh()
}

// show shows conflict i.
func (w *ConflictWindow) show(i int) {
	if len(w.conflicts) == 0 {
		return
	}
	i = min(max(i, 0), len(w.conflicts)-1)
	w.cur = i
	c := w.conflicts[i]
	w.path.SetText(safetext.Line(c.Path))
	w.reason.SetText(upperFirst(safetext.Line(c.Reason)) + ".")
	if c.Again {
		w.reason.Importance = widget.WarningImportance
	} else {
		w.reason.Importance = widget.MediumImportance
	}
	w.reason.Refresh()
	var opts []string
	for _, ch := range c.Choices() {
		if ch == review.UseContent && w.tool[c.Path] == nil {
			continue
		}
		opts = append(opts, choiceNames[ch])
	}
	w.choice.Options = opts
	w.choice.OnChanged = nil
	if r, ok := w.chosen[c.Path]; ok {
		w.choice.SetSelected(choiceNames[r.Choice])
	} else {
		w.choice.SetSelected("")
	}
	w.choice.OnChanged = w.choose
	w.choice.Refresh()
	if c.Editable() {
		w.toolBtn.Enable()
	} else {
		w.toolBtn.Disable()
	}
	setRows(w.mine, sideRows(c, true))
	setRows(w.theirs, sideRows(c, false))
	w.mineScroll.ScrollToTop()
	w.theirsScroll.ScrollToTop()
	w.showResult()
	w.list.Select(i)
}

// choose takes the option named s for the shown conflict.
func (w *ConflictWindow) choose(s string) {
	if len(w.conflicts) == 0 {
		return
	}
	c := w.conflicts[w.cur]
	if s == "" {
		delete(w.chosen, c.Path)
	}
	for ch, name := range choiceNames {
		if name == s {
			seen := c.Project
			w.chosen[c.Path] = review.Resolution{Choice: ch, Content: w.tool[c.Path], Seen: &seen}
		}
	}
	w.showResult()
	w.redraw()
}

// Choose answers conflict path with ch, as a click on its option does.
func (w *ConflictWindow) Choose(path string, ch review.Choice) {
	for i, c := range w.conflicts {
		if c.Path == path {
			w.show(i)
			w.choice.SetSelected(choiceNames[ch])
			return
		}
	}
}

// showResult shows what the chosen resolution writes.
func (w *ConflictWindow) showResult() {
	c := w.conflicts[w.cur]
	r, ok := w.chosen[c.Path]
	if !ok {
		w.help.SetText("Choose how to resolve this file; the result it writes is shown below.")
		w.resultHead.SetText("Result: choose first")
		setRows(w.result, nil)
		return
	}
	w.help.SetText(choiceHelp[r.Choice])
	rows, err := resultRows(c, r)
	if err != nil {
		w.resultHead.SetText("Result: " + err.Error())
		setRows(w.result, nil)
		return
	}
	w.resultHead.SetText("Result: what " + safetext.Line(c.Path) + " will hold")
	if r.Choice == review.KeepMine {
		w.resultHead.SetText("Result: " + safetext.Line(c.Path) + " is left exactly as it is")
	}
	setRows(w.result, rows)
	// Show the first stretch that was in conflict, a few lines above it.
	first := 0
	for i, row := range rows {
		if row.kind == mineRow || row.kind == theirsRow {
			first = max(i-3, 0)
			break
		}
	}
	// The scroll's content is sized to the new rows first, or the
	// offset would be held to the old ones.
	content := w.resultScroll.Content
	content.Resize(content.MinSize().Max(w.resultScroll.Size()))
	rowHeight := fyne.MeasureText("M", theme.TextSize(), fyne.TextStyle{Monospace: true}).Height
	w.resultScroll.ScrollToOffset(fyne.NewPos(0, float32(first)*rowHeight))
}

// runTool runs the user's merge tool on the shown conflict and offers its
// result, shown before anything is written.
func (w *ConflictWindow) runTool() {
	c := w.conflicts[w.cur]
	w.toolBtn.Disable()
	w.status.SetText("Waiting for the merge tool to close…")
	w.async(func() {
		data, err := w.svc.MergeTool(context.Background(), w.id, c)
		fyne.Do(func() {
			w.toolBtn.Enable()
			switch {
			case errors.Is(err, promote.ErrNoMergeTool):
				w.status.SetText("No merge tool is set: see [review] merge_tool in config.toml.")
				dialog.ShowInformation("No merge tool", err.Error(), w.Window)
				return
			case err != nil:
				w.status.SetText("The merge tool gave no result.")
				dialog.ShowError(err, w.Window)
				return
			}
			w.tool[c.Path] = data
			w.status.SetText("The merge tool's result is shown below; Apply writes it.")
			if i := w.indexOf(c.Path); i >= 0 {
				w.show(i)
				w.choice.SetSelected(choiceNames[review.UseContent])
			}
		})
	})
}

func (w *ConflictWindow) indexOf(path string) int {
	for i, c := range w.conflicts {
		if c.Path == path {
			return i
		}
	}
	return -1
}

// apply writes the approved files with the resolutions, all or nothing.
// If a file changed again meanwhile, nothing is written, and the window
// shows the conflicts as they are now.
func (w *ConflictWindow) apply() {
	d := w.d
	if w.written {
		d = onlyFiles(w.d, w.conflicts)
	}
	res := map[string]review.Resolution{}
	for _, c := range w.conflicts {
		res[c.Path] = w.chosen[c.Path]
	}
	w.run("Applying…", d, sandbox.ApplyOptions{AllOrNothing: true, Resolutions: res})
}

// applyOthers writes the files that do not conflict and leaves the
// conflicting ones as they are, for the user to resolve here or later.
func (w *ConflictWindow) applyOthers() {
	w.run("Applying the other files…", w.d, sandbox.ApplyOptions{})
}

func (w *ConflictWindow) run(doing string, d review.Decisions, opts sandbox.ApplyOptions) {
	w.applyBtn.Disable()
	w.othersBtn.Disable()
	w.status.SetText(doing)
	w.async(func() {
		res, err := w.svc.ApplyWith(context.Background(), w.id, d, opts)
		fyne.Do(func() {
			w.othersBtn.Enable()
			if err != nil {
				w.status.SetText("Apply failed: nothing was written.")
				w.redraw()
				dialog.ShowError(err, w.Window)
				return
			}
			if !res.Held && w.onApply != nil {
				w.onApply(res)
			}
			if len(res.Conflicts) == 0 {
				w.Window.Close()
				return
			}
			w.refresh(res, len(opts.Resolutions) == 0)
		})
	})
}

// refresh shows the conflicts of res, an apply that left some: the
// choices made for a file that did not change again are kept.
func (w *ConflictWindow) refresh(res *sandbox.ApplyResult, others bool) {
	var again []string
	keep := map[string]review.Resolution{}
	for _, c := range res.Conflicts {
		r, ok := w.chosen[c.Path]
		switch {
		case c.Again:
			again = append(again, safetext.Line(c.Path))
		case ok && r.Seen != nil && r.Seen.Equal(c.Project):
			keep[c.Path] = r
		}
	}
	w.chosen, w.conflicts = keep, res.Conflicts
	w.written = w.written || !res.Held
	w.withheld = len(res.Withheld)
	switch {
	case len(again) > 0:
		w.status.SetText(fmt.Sprintf("Nothing was written: %s changed again since you chose; look again and choose.", strings.Join(again, ", ")))
	case others:
		w.status.SetText("The other files were written; choose for these, or Close to leave them as they are.")
	default:
		w.status.SetText("Nothing was written: choose again for the files shown.")
	}
	w.redraw()
	w.show(0)
}

// onlyFiles is d cut down to the files of conflicts.
func onlyFiles(d review.Decisions, conflicts []*review.ConflictError) review.Decisions {
	out := review.Decisions{Files: map[string]review.FileDecision{}}
	for _, c := range conflicts {
		f := c.File
		if f == "" {
			f = c.Path
		}
		if fd, ok := d.Files[f]; ok {
			out.Files[f] = fd
		}
	}
	return out
}

// rowKind marks a line of a side or of the result.
type rowKind int

const (
	plainRow rowKind = iota
	mineRow
	theirsRow
	noteRow
)

type textRow struct {
	text string
	kind rowKind
}

// setRows fills g with rows, numbering the lines of text.
func setRows(g *widget.TextGrid, rows []textRow) {
	mono := fyne.TextStyle{Monospace: true}
	styles := map[rowKind]widget.TextGridStyle{
		mineRow:   &widget.CustomTextGridStyle{BGColor: mineBG, TextStyle: mono},
		theirsRow: &widget.CustomTextGridStyle{BGColor: theirsBG, TextStyle: mono},
		noteRow:   &widget.CustomTextGridStyle{TextStyle: fyne.TextStyle{Monospace: true, Italic: true}},
	}
	out := make([]widget.TextGridRow, 0, len(rows))
	for _, r := range rows {
		row := widget.TextGridRow{Style: styles[r.kind]}
		for _, c := range r.text {
			row.Cells = append(row.Cells, widget.TextGridCell{Rune: c})
		}
		out = append(out, row)
	}
	g.Rows = out
	g.Refresh()
}

// lineRows are the lines of data, each made safe to show, marked kind.
func lineRows(data []byte, kind rowKind) []textRow {
	if len(data) == 0 {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	out := make([]textRow, 0, len(lines))
	for _, l := range lines {
		out = append(out, textRow{strings.ReplaceAll(safetext.Line(l), "\t", "    "), kind})
	}
	return out
}

// sideRows shows one side of c: the conflicting stretches when the file
// merges line by line, else the whole version (or what it is instead of
// text).
func sideRows(c *review.ConflictError, mine bool) []textRow {
	if !c.Project.Exists && !c.Approved.Exists {
		// Never a conflict of two versions: a file that cannot be
		// written at all any more (the reason says why).
		return []textRow{{"(cannot be shown: see the reason above)", noteRow}}
	}
	data, st, kind := c.Theirs, c.Approved, theirsRow
	if mine {
		data, st, kind = c.Ours, c.Project, mineRow
	}
	if note := describeState(st, data, mine); note != "" {
		return []textRow{{note, noteRow}}
	}
	if c.Merge == nil {
		return lineRows(data, plainRow)
	}
	var out []textRow
	for _, ch := range c.Merge.Chunks {
		if !ch.Conflict {
			continue
		}
		text, start := ch.Theirs, ch.TheirsStart
		if mine {
			text, start = ch.Ours, ch.OursStart
		}
		out = append(out, textRow{fmt.Sprintf("── line %d ──", start), noteRow})
		if len(text) == 0 {
			out = append(out, textRow{"(these lines removed)", noteRow})
		}
		out = append(out, lineRows(text, kind)...)
	}
	return out
}

// describeState says what a side is when it is not text to show: absent,
// a link, a directory, binary; "" for text.
func describeState(st review.EntryState, data []byte, mine bool) string {
	switch {
	case !st.Exists && mine:
		return "(no file: you removed it since the run)"
	case !st.Exists:
		return "(no file: the approved change removes it)"
	case st.Type == manifest.Symlink:
		return "(a symbolic link to " + safetext.Line(st.Target) + ")"
	case st.Type == manifest.Dir:
		return "(a directory)"
	case bytes.IndexByte(data, 0) >= 0:
		return fmt.Sprintf("(a binary file of %d bytes)", len(data))
	}
	return ""
}

// resultRows is what r writes, the conflicting stretches marked by side.
func resultRows(c *review.ConflictError, r review.Resolution) ([]textRow, error) {
	content, exists, err := c.Resolved(r)
	if err != nil {
		return nil, err
	}
	switch r.Choice {
	case review.KeepMine:
		if note := describeState(c.Project, content, true); note != "" {
			return []textRow{{note, noteRow}}, nil
		}
	case review.TakeTheirs:
		if note := describeState(c.Approved, content, false); note != "" {
			return []textRow{{note, noteRow}}, nil
		}
	}
	if !exists {
		return []textRow{{"(no file)", noteRow}}, nil
	}
	if c.Merge == nil || r.Choice == review.UseContent {
		if bytes.IndexByte(content, 0) >= 0 {
			return []textRow{{fmt.Sprintf("(a binary file of %d bytes)", len(content)), noteRow}}, nil
		}
		return lineRows(content, plainRow), nil
	}
	// The merge's own chunks: settled text, then each conflicting
	// stretch as chosen. Lines are split on the whole result so that a
	// stretch without a final newline still reads as the file does.
	var out []textRow
	var pending []byte
	flush := func(kind rowKind) {
		out = append(out, lineRows(pending, kind)...)
		pending = nil
	}
	for _, ch := range c.Merge.Chunks {
		if !ch.Conflict {
			pending = append(pending, ch.Content...)
			continue
		}
		flush(plainRow)
		if r.Choice != review.TakeTheirs {
			pending = append(pending, ch.Ours...)
			if r.Choice == review.KeepBoth && len(ch.Ours) > 0 && ch.Ours[len(ch.Ours)-1] != '\n' && len(ch.Theirs) > 0 {
				pending = append(pending, '\n')
			}
			flush(mineRow)
		}
		if r.Choice != review.KeepMine {
			pending = append(pending, ch.Theirs...)
			flush(theirsRow)
		}
	}
	flush(plainRow)
	return out, nil
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
