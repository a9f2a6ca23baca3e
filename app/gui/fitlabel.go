package gui

import (
	"sort"
	"strings"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// fitLabel is a one-line label that never sets its container's minimum
// width: text that does not fit ends at a word (or a path's slash) with
// "…", never inside a word, and the whole text shows in a tooltip while
// the pointer is over it, or after a tap. Text is shown as given:
// callers pass guest text through safetext first. (tipLabel cuts where
// the width ends; fitLabel is for sentences: a status, a summary.)
type fitLabel struct {
	widget.BaseWidget
	// Text is the whole text; SetText changes it.
	Text string
	// Tip, if set, is shown in the tooltip instead of Text, even when
	// Text fits.
	Tip string
	// onTap, if set, takes a tap instead of the tooltip: a table cell's
	// label passes the tap on to its row.
	onTap func()

	label *widget.Label
	tip   tooltip
}

func newFitLabel(text string, style fyne.TextStyle) *fitLabel {
	t := &fitLabel{Text: text, label: widget.NewLabelWithStyle(oneLine(text), fyne.TextAlignLeading, style)}
	// The label's own ellipsis is a backstop for a pixel of rounding; the
	// words are fitted here.
	t.label.Truncation = fyne.TextTruncateEllipsis
	t.ExtendBaseWidget(t)
	return t
}

// SetText shows s, fitted to the label's width.
func (t *fitLabel) SetText(s string) {
	t.Text = s
	t.fit(t.Size().Width)
}

// Shown is the text as it is drawn (shortened or whole).
func (t *fitLabel) Shown() string { return t.label.Text }

func (t *fitLabel) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(t.label) }

func (t *fitLabel) MinSize() fyne.Size {
	t.ExtendBaseWidget(t)
	return t.label.MinSize()
}

func (t *fitLabel) Resize(s fyne.Size) {
	t.BaseWidget.Resize(s)
	t.fit(s.Width)
}

func (t *fitLabel) fit(width float32) {
	text := oneLine(t.Text)
	if width > 0 {
		style, size := t.label.TextStyle, theme.TextSize()
		if t.label.SizeName != "" {
			size = theme.Size(t.label.SizeName)
		}
		avail := width - 2*theme.InnerPadding() - 1
		text = fitWords(text, avail, func(s string) float32 { return fyne.MeasureText(s, size, style).Width })
	}
	if text != t.label.Text {
		t.label.SetText(text)
	}
}

// tipText is what the tooltip shows: Tip, or Text when it was shortened.
func (t *fitLabel) tipText() string {
	if t.Tip != "" {
		return t.Tip
	}
	if t.label.Text != oneLine(t.Text) {
		return t.Text
	}
	return ""
}

func (t *fitLabel) MouseIn(e *desktop.MouseEvent)  { t.showTip(e.AbsolutePosition) }
func (t *fitLabel) MouseMoved(*desktop.MouseEvent) {}
func (t *fitLabel) MouseOut()                      { t.tip.hide() }

func (t *fitLabel) Tapped(e *fyne.PointEvent) {
	if t.onTap != nil {
		t.onTap()
		return
	}
	t.showTip(e.AbsolutePosition)
}

// setStyle draws the text in style.
func (t *fitLabel) setStyle(style fyne.TextStyle) {
	if t.label.TextStyle != style {
		t.label.TextStyle = style
		t.label.Refresh()
		t.fit(t.Size().Width)
	}
}

func (t *fitLabel) showTip(at fyne.Position) {
	t.tip.text = t.tipText()
	t.tip.show(t, at)
}

// tipIcon is a row's icon with a tooltip, such as the mark on a file the
// user changed on their side.
type tipIcon struct {
	widget.BaseWidget
	Tip string
	img *canvas.Image
	tip tooltip
}

func newTipIcon(res fyne.Resource, tip string) *tipIcon {
	i := &tipIcon{Tip: tip, img: rowImage(res)}
	i.ExtendBaseWidget(i)
	return i
}

func (i *tipIcon) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(i.img) }
func (i *tipIcon) MouseIn(e *desktop.MouseEvent)       { i.showTip(e.AbsolutePosition) }
func (i *tipIcon) MouseMoved(*desktop.MouseEvent)      {}
func (i *tipIcon) MouseOut()                           { i.tip.hide() }
func (i *tipIcon) Tapped(e *fyne.PointEvent)           { i.showTip(e.AbsolutePosition) }

func (i *tipIcon) showTip(at fyne.Position) {
	i.tip.text = i.Tip
	i.tip.show(i, at)
}

// oneLine puts a text on one line: its line breaks become spaces.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// fitWords shortens s to fit avail as measured, ending at a word (or
// after a slash) with "…"; a first word too long for the space is cut
// where it must be.
func fitWords(s string, avail float32, measure func(string) float32) string {
	if measure(s) <= avail {
		return s
	}
	const more = "…"
	var cuts []int // prefix lengths ending at a word
	for i, r := range s {
		switch r {
		case ' ':
			if p := strings.TrimRight(s[:i], " ·,;:"); p != "" {
				cuts = append(cuts, len(p))
			}
		case '/':
			cuts = append(cuts, i+1)
		}
	}
	cuts = dedupSorted(cuts)
	// The longest prefix that fits, by binary search.
	n := sort.Search(len(cuts), func(i int) bool { return measure(s[:cuts[i]]+more) > avail })
	if n > 0 {
		return s[:cuts[n-1]] + more
	}
	// Not even the first word: cut inside it.
	var runes []int
	for i := range s {
		if i > 0 {
			runes = append(runes, i)
		}
	}
	n = sort.Search(len(runes), func(i int) bool { return measure(s[:runes[i]]+more) > avail })
	if n > 0 {
		return s[:runes[n-1]] + more
	}
	if measure(more) <= avail && utf8.RuneCountInString(s) > 0 {
		return more
	}
	return ""
}

func dedupSorted(xs []int) []int {
	sort.Ints(xs)
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}
