package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// tipWidth is the widest a tooltip grows before its text wraps.
const tipWidth = 560

// tooltip shows a text in a pop-up under the pointer while it hovers
// over a widget (fyne has no tooltips of its own). The pop-up is an
// overlay of the canvas: it never sets the window's size.
type tooltip struct {
	text  string
	popup *widget.PopUp
}

func (t *tooltip) show(over fyne.CanvasObject, at fyne.Position) {
	if t.text == "" {
		return
	}
	c := fyne.CurrentApp().Driver().CanvasForObject(over)
	if c == nil {
		return
	}
	l := widget.NewLabel(t.text)
	l.Wrapping = fyne.TextWrapWord
	w := min(fyne.MeasureText(t.text, theme.TextSize(), fyne.TextStyle{}).Width+4*theme.Padding(), tipWidth)
	t.popup = widget.NewPopUp(l, c)
	// A wrapped label is as tall as its lines at the width it has.
	l.Resize(fyne.NewSize(w, l.MinSize().Height))
	size := fyne.NewSize(w, min(l.MinSize().Height, c.Size().Height/2))
	t.popup.Resize(size)
	pos := at.AddXY(0, 24)
	if pos.X+size.Width > c.Size().Width {
		pos.X = max(c.Size().Width-size.Width, 0)
	}
	if pos.Y+size.Height > c.Size().Height {
		pos.Y = max(at.Y-size.Height-8, 0)
	}
	t.popup.ShowAtPosition(pos)
}

func (t *tooltip) hide() {
	if t.popup != nil {
		t.popup.Hide()
		t.popup = nil
	}
}

// tipLabel is a one-line label cut with an ellipsis, whose whole text
// shows in a tooltip: a long path or command line never sets the
// window's minimum width.
type tipLabel struct {
	widget.Label
	tip tooltip
}

var _ desktop.Hoverable = (*tipLabel)(nil)

func newTipLabel(text string, style fyne.TextStyle) *tipLabel {
	l := &tipLabel{}
	l.TextStyle = style
	l.Truncation = fyne.TextTruncateEllipsis
	l.ExtendBaseWidget(l)
	l.SetText(text)
	return l
}

// SetText sets the label's text; the tooltip shows it whole.
func (l *tipLabel) SetText(s string) {
	l.tip.text = s
	l.Label.SetText(s)
}

// SetTip sets a tooltip other than the text ("" the text).
func (l *tipLabel) SetTip(s string) {
	if s == "" {
		s = l.Text
	}
	l.tip.text = s
}

func (l *tipLabel) MouseIn(e *desktop.MouseEvent)  { l.tip.show(l, e.AbsolutePosition) }
func (l *tipLabel) MouseMoved(*desktop.MouseEvent) {}
func (l *tipLabel) MouseOut()                      { l.tip.hide() }

// tipButton is a button, often an icon alone, that says what it does in
// a tooltip.
type tipButton struct {
	widget.Button
	tip tooltip
}

func newTipButton(label string, icon fyne.Resource, tip string, tapped func()) *tipButton {
	b := &tipButton{tip: tooltip{text: tip}}
	b.Text, b.Icon, b.OnTapped = label, icon, tapped
	b.ExtendBaseWidget(b)
	return b
}

func (b *tipButton) MouseIn(e *desktop.MouseEvent) {
	b.Button.MouseIn(e)
	b.tip.show(b, e.AbsolutePosition)
}

func (b *tipButton) MouseOut() {
	b.Button.MouseOut()
	b.tip.hide()
}

// dropZone is an area outlined with a dashed line, where a folder can be
// dropped (the whole window takes drops; the zone shows where to).
type dropZone struct {
	widget.BaseWidget
	content fyne.CanvasObject
}

func newDropZone(content fyne.CanvasObject) *dropZone {
	z := &dropZone{content: content}
	z.ExtendBaseWidget(z)
	return z
}

func (z *dropZone) CreateRenderer() fyne.WidgetRenderer {
	bg := canvas.NewRectangle(color.Transparent)
	bg.CornerRadius = theme.InputRadiusSize()
	return &dropZoneRenderer{z: z, bg: bg, inner: container.NewPadded(z.content)}
}

type dropZoneRenderer struct {
	z      *dropZone
	bg     *canvas.Rectangle
	inner  *fyne.Container
	dashes []fyne.CanvasObject
}

// Dashes of the outline, in pixels.
const (
	dashLen = 8
	dashGap = 6
)

func (r *dropZoneRenderer) Layout(s fyne.Size) {
	r.bg.Resize(s)
	r.inner.Resize(s)
	col := theme.Color(theme.ColorNamePlaceHolder)
	r.dashes = r.dashes[:0]
	line := func(x1, y1, x2, y2 float32) {
		l := canvas.NewLine(col)
		l.StrokeWidth = 2
		l.Position1, l.Position2 = fyne.NewPos(x1, y1), fyne.NewPos(x2, y2)
		r.dashes = append(r.dashes, l)
	}
	const in = 1
	for x := float32(in); x < s.Width-in; x += dashLen + dashGap {
		end := min(x+dashLen, s.Width-in)
		line(x, in, end, in)
		line(x, s.Height-in, end, s.Height-in)
	}
	for y := float32(in); y < s.Height-in; y += dashLen + dashGap {
		end := min(y+dashLen, s.Height-in)
		line(in, y, in, end)
		line(s.Width-in, y, s.Width-in, end)
	}
}

func (r *dropZoneRenderer) MinSize() fyne.Size {
	return r.inner.MinSize()
}

func (r *dropZoneRenderer) Refresh() {
	r.bg.Refresh()
	r.Layout(r.z.Size())
	r.inner.Refresh()
}

func (r *dropZoneRenderer) Objects() []fyne.CanvasObject {
	return append(append([]fyne.CanvasObject{r.bg}, r.dashes...), r.inner)
}

func (r *dropZoneRenderer) Destroy() {}
