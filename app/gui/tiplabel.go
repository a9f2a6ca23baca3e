package gui

import (
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// tipDelay is how long the pointer rests on a shortened text before its
// whole text shows.
const tipDelay = 400 * time.Millisecond

// tipWidth is the widest a tip gets; longer text wraps.
const tipWidth = 640

// tipLabel is a one-line label that never sets its container's minimum
// width: text that does not fit ends at a word (or a path's slash) with
// "…", and the whole text shows in a tip while the pointer rests on it,
// or after a tap. Text is shown as given: callers pass guest text
// through safetext first.
type tipLabel struct {
	widget.BaseWidget
	// Text is the whole text; SetText changes it.
	Text string
	// Tip, if set, is shown in the tip instead of Text, even when Text
	// fits.
	Tip string

	label *widget.Label
	tip   tipper
}

func newTipLabel(text string, style fyne.TextStyle) *tipLabel {
	t := &tipLabel{Text: text, label: widget.NewLabelWithStyle(oneLine(text), fyne.TextAlignLeading, style)}
	// The label's own ellipsis is a backstop for a pixel of rounding; the
	// words are fitted here.
	t.label.Truncation = fyne.TextTruncateEllipsis
	t.tip.owner = t
	t.ExtendBaseWidget(t)
	return t
}

// SetText shows s, fitted to the label's width.
func (t *tipLabel) SetText(s string) {
	t.Text = s
	t.fit(t.Size().Width)
}

// Shown is the text as it is drawn (shortened or whole).
func (t *tipLabel) Shown() string { return t.label.Text }

func (t *tipLabel) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(t.label) }

func (t *tipLabel) MinSize() fyne.Size {
	t.ExtendBaseWidget(t)
	return t.label.MinSize()
}

func (t *tipLabel) Resize(s fyne.Size) {
	t.BaseWidget.Resize(s)
	t.fit(s.Width)
}

func (t *tipLabel) fit(width float32) {
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

// tipText is what the tip shows: Tip, or Text when it was shortened.
func (t *tipLabel) tipText() string {
	if t.Tip != "" {
		return t.Tip
	}
	if t.label.Text != oneLine(t.Text) {
		return t.Text
	}
	return ""
}

func (t *tipLabel) MouseIn(*desktop.MouseEvent)    { t.tip.later(t.tipText()) }
func (t *tipLabel) MouseMoved(*desktop.MouseEvent) {}
func (t *tipLabel) MouseOut()                      { t.tip.hide() }
func (t *tipLabel) Tapped(*fyne.PointEvent)        { t.tip.toggle(t.tipText()) }

// tipIcon is a row's icon with a tip, such as the mark on a file the
// user changed on their side.
type tipIcon struct {
	widget.BaseWidget
	Tip string
	img *canvas.Image
	tip tipper
}

func newTipIcon(res fyne.Resource, tip string) *tipIcon {
	i := &tipIcon{Tip: tip, img: rowImage(res)}
	i.tip.owner = i
	i.ExtendBaseWidget(i)
	return i
}

func (i *tipIcon) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(i.img) }
func (i *tipIcon) MouseIn(*desktop.MouseEvent)         { i.tip.later(i.Tip) }
func (i *tipIcon) MouseMoved(*desktop.MouseEvent)      {}
func (i *tipIcon) MouseOut()                           { i.tip.hide() }
func (i *tipIcon) Tapped(*fyne.PointEvent)             { i.tip.toggle(i.Tip) }

// tipper shows a tip under (or above) its owner.
type tipper struct {
	owner fyne.CanvasObject
	popup *widget.PopUp
	gen   int // bumped on hide, so a late timer shows nothing
}

func (p *tipper) later(text string) {
	if text == "" {
		return
	}
	p.gen++
	gen := p.gen
	time.AfterFunc(tipDelay, func() {
		fyne.Do(func() {
			if gen == p.gen {
				p.show(text)
			}
		})
	})
}

func (p *tipper) toggle(text string) {
	if p.popup != nil && p.popup.Visible() {
		p.hide()
		return
	}
	p.show(text)
}

func (p *tipper) hide() {
	p.gen++
	if p.popup != nil {
		p.popup.Hide()
		p.popup = nil
	}
}

func (p *tipper) show(text string) {
	if text == "" {
		return
	}
	c := fyne.CurrentApp().Driver().CanvasForObject(p.owner)
	if c == nil {
		return
	}
	p.hide()
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	pad := 2 * theme.InnerPadding()
	w := min(fyne.MeasureText(text, theme.TextSize(), fyne.TextStyle{}).Width+pad+2, tipWidth, c.Size().Width-2*theme.Padding())
	l.Resize(fyne.NewSize(w, l.MinSize().Height))
	size := fyne.NewSize(w, l.MinSize().Height)
	p.popup = widget.NewPopUp(l, c)
	p.popup.Resize(size)
	pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(p.owner)
	below := pos.Y + p.owner.Size().Height
	if below+size.Height > c.Size().Height && pos.Y-size.Height >= 0 {
		below = pos.Y - size.Height - 2*theme.Padding()
	}
	x := min(pos.X, c.Size().Width-size.Width-2*theme.Padding())
	p.popup.ShowAtPosition(fyne.NewPos(max(x, 0), below))
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
