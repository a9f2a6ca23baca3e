package gui

import (
	"cmp"
	"fmt"
	"image"
	"slices"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// diffPane is the review window's diff: a header row for the file under
// the cursor (pinned above the scrolling diff), its flags a line each,
// then its hunks, each under a bar with its verdict, the unchanged lines
// between them folded, and the comments under the lines they are about
// (pane_diff_comments.go). Something else can be shown in its place (a
// staged action).
type diffPane struct {
	m        *reviewModel
	readOnly bool
	// win is the window it is in: a comment box takes the focus on its
	// canvas, and a theme change redraws only an open window.
	win   fyne.Window
	async func(func()) // highlights a large file off fyne's goroutine
	// asyncBudget is how long that may take per side (zero:
	// asyncHighlightTime); tests that are not about the limit raise it.
	asyncBudget time.Duration
	ev          diffEvents
	// instead, if set, draws what the cursor is on in the pane's place
	// when that is not a file (a staged action), and reports whether it
	// did.
	instead func(scroll bool) bool

	box       *fyne.Container // the diff, in scroll
	scroll    *container.Scroll
	hunkBoxes []fyne.CanvasObject
	hunkCheck []*widget.Button // each hunk's verdict: a tap flips it
	fileState *widget.Label    // the shown file's state
	fileHead  *fyne.Container  // its row, laid out again when the state changes
	dv        diffState
}

// diffEvents is what the diff tells the window it is in.
type diffEvents interface {
	// refresh saves the decisions after a verdict or a comment given in
	// the diff and redraws them.
	refresh()
}

// diffState is the diff pane's state, kept while the window is open.
type diffState struct {
	pane  *fyne.Container // the header above the scrolling diff
	head  *fyne.Container // the pinned header row and the file's notes
	split bool            // side by side, else unified
	pal   *diffPalette

	// The file shown, prepared once: each side's lines and the hunks'.
	file     *review.File
	old, new []styledLine
	hunks    [][]diffLine
	gaps     []contextGap
	digits   int
	// An image file's sides, decoded; images is false when it is not
	// one or a side does not decode.
	oldImg, newImg image.Image
	images         bool

	opened    map[string][]gapOpen // per file, the unchanged lines shown around each gap
	generated map[string]bool      // generated files whose diff the user asked to see
	longHunks map[string]bool      // "path\x00i": long hunks shown whole
	draft     *commentDraft

	bars []hunkBar // per hunk of the file shown
	// rendering is set while the pane is drawn.
	rendering bool
	codes     []*codeView               // every code view shown, in order (for tests)
	cards     map[int]fyne.CanvasObject // the shown file's comments as drawn, by index
}

// commentDraft is a comment being written or edited.
type commentDraft struct {
	path   string
	old    bool // about the baseline's lines (removed lines)
	anchor int  // the line clicked first; Shift-click extends from it
	start  int
	end    int
	index  int // the comment edited, -1 for a new one
	entry  *fieldEntry
	box    fyne.CanvasObject // the box it is written in, as last drawn
}

// Files up to this size (both sides) are highlighted before they are
// drawn; larger ones are drawn plain first.
const syncHighlightBytes = 64 << 10

// The diff views, as the header offers them.
const (
	viewUnified = "Unified"
	viewSplit   = "Side by side"
)

// Lines of context a "Show more" reveals, and the lines of a hunk shown
// before it is folded.
const (
	contextStep   = 20
	maxHunkShown  = 400
	imageMaxWidth = 420
)

// newDiffPane makes the diff of the review m in win: the header row
// above the scrolling diff.
func newDiffPane(m *reviewModel, win fyne.Window, async func(func()), ev diffEvents) *diffPane {
	p := &diffPane{m: m, win: win, async: async, ev: ev}
	p.box = container.NewVBox()
	p.scroll = container.NewVScroll(container.NewPadded(p.box))
	p.dv.head = container.NewStack()
	// The catcher over the diff takes only the wheel: the line numbers,
	// buttons and comment boxes under it get their clicks.
	p.dv.pane = container.NewBorder(p.dv.head, nil, nil, nil, wheelScroll(p.scroll))
	return p
}

// content is the pane as the Changes tab shows it.
func (p *diffPane) content() fyne.CanvasObject { return p.dv.pane }

// setModel shows the review m, read only or not.
func (p *diffPane) setModel(m *reviewModel, readOnly bool) { p.m, p.readOnly = m, readOnly }

// redraw shows the file's state again (its hunks' verdicts are painted
// where they change).
func (p *diffPane) redraw() {
	if f := p.m.current(); f != nil && p.fileState != nil {
		p.fileState.SetText(p.m.fileState(f).String())
		p.fileHead.Refresh()
	}
}

// forgetComment follows comment i of file path deleted elsewhere: a box
// editing it is gone, one editing a later comment of the file moves up.
func (p *diffPane) forgetComment(path string, i int) {
	if d := p.dv.draft; d != nil && d.path == path && d.index >= i {
		if d.index == i {
			p.dv.draft = nil
		} else {
			d.index--
		}
	}
}

// showFile renders the file under the cursor into the diff pane and
// scrolls to the hunk under the cursor.
func (p *diffPane) showFile() { p.render(true) }

// render draws the file under the cursor again; without scroll it keeps
// the pane where it was (after a click inside the diff).
func (p *diffPane) render(scroll bool) {
	if p.instead != nil && p.instead(scroll) {
		return
	}
	offset := p.scroll.Offset
	p.dv.rendering = true
	defer func() { p.dv.rendering = false }()
	p.box.RemoveAll()
	p.hunkBoxes, p.hunkCheck, p.dv.bars, p.dv.codes = nil, nil, nil, nil
	p.dv.cards = map[int]fyne.CanvasObject{}
	a := fyne.CurrentApp()
	p.dv.pal = newDiffPalette(a.Settings().Theme(), a.Settings().ThemeVariant())
	f := p.m.current()
	if f == nil {
		p.dv.head.RemoveAll()
		p.dv.pane.Refresh()
		appendTo(p.box, widget.NewLabel("The agent changed nothing."))
		p.box.Refresh()
		return
	}
	p.prepare(f)
	// The header and the file's flags stay in view above the diff.
	head := container.NewVBox(p.fileHeader(f))
	for _, n := range p.fileNotes(f) {
		appendTo(head, n)
	}
	appendTo(head, widget.NewSeparator())
	p.dv.head.Objects = []fyne.CanvasObject{head}
	p.dv.pane.Refresh() // the header's height changes with the notes
	spots := newCommentSpots(p.m.comments(f.Path))
	for _, i := range spots.whole {
		appendTo(p.box, p.commentView(f, i))
	}
	if d := p.dv.draft; d != nil && d.path == f.Path && d.index < 0 && d.start == 0 {
		appendTo(p.box, p.draftView(f))
		spots.draftPlaced = true
	}
	p.fileBody(f, spots)
	if rest := spots.unplaced(); len(rest) > 0 {
		appendTo(p.box, widget.NewLabelWithStyle("Comments on lines not shown above:", fyne.TextAlignLeading, fyne.TextStyle{Italic: true}))
		for _, i := range rest {
			appendTo(p.box, p.foldedCommentView(f, i))
		}
	}
	if d := p.dv.draft; d != nil && d.path == f.Path && d.index < 0 && !spots.draftPlaced {
		appendTo(p.box, p.draftView(f))
	}
	p.box.Refresh()
	p.scroll.Refresh() // the scroll learns the new content's height
	if scroll {
		p.markHunk()
		return
	}
	p.paintCursor()
	p.scroll.Offset = offset
	p.scroll.Refresh()
}

// prepare numbers f's hunks and styles its sides, once per file. A large
// file is shown plain at once, then highlighted off fyne's goroutine
// (chroma takes a while on it) and drawn again when the colours are there.
func (p *diffPane) prepare(f *review.File) {
	if p.dv.file == f {
		return
	}
	p.dv.file = f
	p.dv.oldImg, p.dv.newImg, p.dv.images = imagePair(f)
	var old, new []byte
	if !f.Binary {
		old, new = f.OldContent(), f.NewContent()
	}
	p.setSides(f, plainSide(old), plainSide(new))
	if p.dv.opened == nil {
		p.dv.opened, p.dv.generated, p.dv.longHunks = map[string][]gapOpen{}, map[string]bool{}, map[string]bool{}
	}
	if len(p.dv.opened[f.Path]) != len(p.dv.gaps) {
		p.dv.opened[f.Path] = make([]gapOpen, len(p.dv.gaps))
	}
	if len(f.Hunks) == 0 || !highlighted(f.Path) {
		return
	}
	if len(old)+len(new) <= syncHighlightBytes {
		oldStyled, oldInTime := styleSide(f.Path, old, syncHighlightTime)
		newStyled, newInTime := styleSide(f.Path, new, syncHighlightTime)
		if oldInTime && newInTime {
			p.setSides(f, oldStyled, newStyled)
			return
		}
		// A busy machine (or a file slow to tokenise) ran out of the
		// time the window may wait: the colours come later, as for a
		// large file, never plain for good.
	}
	budget := cmp.Or(p.asyncBudget, asyncHighlightTime)
	p.async(func() {
		oldStyled, _ := styleSide(f.Path, old, budget)
		newStyled, _ := styleSide(f.Path, new, budget)
		fyne.Do(func() {
			if p.dv.file != f {
				return // another file is shown by now
			}
			p.setSides(f, oldStyled, newStyled)
			if !p.dv.rendering {
				p.render(false)
			}
		})
	})
}

// setSides takes f's sides as they are to be shown and numbers its hunks
// with them.
func (p *diffPane) setSides(f *review.File, old, new []styledLine) {
	p.dv.old, p.dv.new, p.dv.hunks = old, new, nil
	for _, h := range f.Hunks {
		p.dv.hunks = append(p.dv.hunks, hunkLines(h, old, new))
	}
	p.dv.gaps = gaps(f, len(old), len(new))
	p.dv.digits = len(strconv.Itoa(max(len(old), len(new))))
}

// fileHeader is the file's one row: its icon and path, +N −M, its state,
// the view toggle and Approve file / Reject file.
func (p *diffPane) fileHeader(f *review.File) fyne.CanvasObject {
	// A long path is cut with an ellipsis, whole in its tooltip.
	title := newTipLabel(safetext.Line(f.Path), fyne.TextStyle{Bold: true})
	approve := widget.NewButtonWithIcon("Approve file", theme.ConfirmIcon(), func() { p.m.setFile(f, true); p.decided() })
	reject := widget.NewButtonWithIcon("Reject file", theme.CancelIcon(), func() { p.m.setFile(f, false); p.decided() })
	state := widget.NewLabel(p.m.fileState(f).String())
	if p.readOnly {
		approve.Disable()
		reject.Disable()
		state.SetText("read only") // the view's choice above names the round
	}
	p.fileState = state
	// The view, as a choice that reads in both themes (an unchecked box
	// hardly shows in the light one).
	view := widget.NewSelect([]string{viewUnified, viewSplit}, nil)
	view.SetSelected(viewUnified)
	if p.dv.split {
		view.SetSelected(viewSplit)
	}
	view.OnChanged = func(s string) {
		if on := s == viewSplit; on != p.dv.split {
			p.dv.split = on
			p.render(false)
		}
	}
	right := container.NewHBox()
	if f.Added > 0 || f.Removed > 0 {
		plus := widget.NewLabelWithStyle(fmt.Sprintf("+%d", f.Added), fyne.TextAlignTrailing, fyne.TextStyle{Monospace: true})
		plus.Importance = widget.SuccessImportance
		minus := widget.NewLabelWithStyle(fmt.Sprintf("−%d", f.Removed), fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
		minus.Importance = widget.DangerImportance
		right.Add(container.New(layout.NewCustomPaddedHBoxLayout(0), plus, minus))
	}
	comment := newTipButton("", theme.MailComposeIcon(), "Comment on the whole file", func() { p.startDraft(f.Path, false, 0, 0) })
	comment.Importance = widget.LowImportance
	if p.readOnly {
		comment.Disable()
	}
	right.Add(state)
	if len(f.Hunks) > 0 {
		right.Add(view)
	}
	if !p.readOnly {
		// A round's own changes are for reading: its buttons would only
		// take the path's room.
		right.Objects = append(right.Objects, comment, approve, reject)
	}
	p.fileHead = container.NewBorder(nil, nil, widget.NewIcon(statusIcon(f)), right, title)
	return p.fileHead
}

// decided follows a verdict given in the diff pane: saved, and shown in
// the tree, the header and the hunk bars.
func (p *diffPane) decided() {
	p.ev.refresh()
	p.updateHunks()
}

// fileNotes are the file's flags and what its change is, a line each
// under the header,
// only those it has: what runs on the host, control characters, a
// rename, a mode or type change, a link, a binary file.
func (p *diffPane) fileNotes(f *review.File) []fyne.CanvasObject {
	var out []fyne.CanvasObject
	hostExec := f.FlagReason(review.FlagHostExec)
	if hostExec != "" {
		warn := widget.NewLabelWithStyle(strings.ToUpper(hostExec[:1])+hostExec[1:]+". Apply asks before writing it.", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		warn.Importance = widget.WarningImportance
		warn.Wrapping = fyne.TextWrapWord
		out = append(out, container.NewBorder(nil, nil, widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon())), nil, warn))
	}
	if m := meaningNote(f); m != nil {
		out = append(out, m)
	}
	for _, line := range describeFile(f) {
		switch {
		case line == "New file", line == "Deleted", strings.HasPrefix(line, "+"): // in the header
			continue
		case hostExec != "" && line == flagText(review.Flag{Kind: review.FlagHostExec, Reason: hostExec}):
			continue
		case p.dv.images && strings.HasPrefix(line, "Binary file:"): // the images say it
			continue
		}
		l := widget.NewLabel(line)
		l.Wrapping = fyne.TextWrapWord
		if strings.HasPrefix(line, "⚠") {
			l.Importance = widget.WarningImportance
		}
		out = append(out, l)
	}
	if len(f.Hunks) > 0 && !f.HunkSelectable() {
		note := widget.NewLabelWithStyle(fmt.Sprintf("A change like this (%s) is taken or left whole: approve or reject the file.", describe(f)), fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
		note.Wrapping = fyne.TextWrapWord
		out = append(out, note)
	}
	return out
}

// meaningLines is how many of a file's changes its note above the diff
// lists before it says how many more (diff --summary lists them all).
const meaningLines = 6

// meaningNote says what the file's change means, a declaration a line
// ("function count_words: new parameter stop_words, body changed"), for a
// file its language's parser read; nil for any other (its header has the
// line counts).
func meaningNote(f *review.File) fyne.CanvasObject {
	if f.Semantic == nil {
		return nil
	}
	lines := f.Semantic.Lines(meaningLines) // names shown safely already
	for i, l := range lines {
		lines[i] = "• " + l
	}
	l := widget.NewLabel(strings.Join(lines, "\n"))
	l.Wrapping = fyne.TextWrapWord
	return container.NewBorder(nil, nil, container.NewVBox(widget.NewIcon(theme.InfoIcon())), nil, l)
}

func describe(f *review.File) string {
	switch {
	case f.Status == review.Added:
		return "a new file"
	case f.Status == review.Deleted:
		return "a deletion"
	case f.IsSymlink():
		return "a symbolic link"
	}
	return string(f.Status)
}

// themeChanged draws the diff again in the new theme's colours when the
// system theme changed from light to dark or back while a file is shown
// (fyne redraws its own widgets; the diff's colours are Airlock's). fyne
// keeps a settings listener for good: once the window is closed it does
// nothing.
func (p *diffPane) themeChanged() {
	a := fyne.CurrentApp()
	if p.dv.pal == nil || !slices.Contains(a.Driver().AllWindows(), p.win) {
		return
	}
	if pal := newDiffPalette(a.Settings().Theme(), a.Settings().ThemeVariant()); pal.dark != p.dv.pal.dark || pal.fg != p.dv.pal.fg {
		p.render(false)
	}
}

// showInstead shows head and body in the diff pane's place (a staged
// action).
func (p *diffPane) showInstead(head fyne.CanvasObject, body []fyne.CanvasObject, scroll bool) {
	p.box.RemoveAll()
	p.hunkBoxes, p.hunkCheck, p.dv.bars, p.dv.codes = nil, nil, nil, nil
	p.dv.cards = map[int]fyne.CanvasObject{}
	p.dv.head.Objects = []fyne.CanvasObject{head}
	p.dv.pane.Refresh()
	for _, o := range body {
		appendTo(p.box, o)
	}
	p.box.Refresh()
	p.scroll.Refresh()
	if scroll {
		p.scroll.ScrollToTop()
	}
}

// statusIcon is the tree's icon for a change.
func statusIcon(f *review.File) fyne.Resource {
	switch {
	case f.Binary:
		return theme.FileImageIcon()
	case f.Status == review.Added:
		return theme.ContentAddIcon()
	case f.Status == review.Deleted:
		return theme.DeleteIcon()
	case f.Status == review.Renamed:
		return theme.ContentRedoIcon()
	case f.Status == review.ModeChanged:
		return theme.SettingsIcon()
	case f.Status == review.TypeChanged:
		return theme.ViewRefreshIcon()
	}
	return theme.DocumentCreateIcon()
}
