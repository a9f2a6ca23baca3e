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

// tooltip shows a text in a box under the pointer while it hovers over a
// widget (fyne has no tooltips of its own). The box is drawn on the
// window's tip layer (withTips), which takes no input, so a click goes to
// the widget under it; it never sets the window's size. A window without
// a tip layer shows no tooltips.
type tooltip struct {
	text  string
	layer *tipLayer
}

func (t *tooltip) show(over fyne.CanvasObject, at fyne.Position) {
	if t.text == "" {
		return
	}
	c := fyne.CurrentApp().Driver().CanvasForObject(over)
	if c == nil {
		return
	}
	if t.layer = tipLayerOf(c); t.layer != nil {
		t.layer.show(t.text, at)
	}
}

func (t *tooltip) hide() {
	if t.layer != nil {
		t.layer.hide()
		t.layer = nil
	}
}

// withTips lays a tip layer over a window's content.
func withTips(content fyne.CanvasObject) fyne.CanvasObject {
	return container.NewStack(content, newTipLayer())
}

// tipLayerOf is the tip layer of a canvas whose content withTips made.
func tipLayerOf(c fyne.Canvas) *tipLayer {
	if s, ok := c.Content().(*fyne.Container); ok && len(s.Objects) == 2 {
		if l, ok := s.Objects[1].(*tipLayer); ok {
			return l
		}
	}
	return nil
}

// tipLayer is where tooltips are drawn: it covers the window, but
// nothing in it is tappable or hoverable.
type tipLayer struct {
	widget.BaseWidget
	bg    *canvas.Rectangle
	label *widget.Label
	box   *fyne.Container
}

func newTipLayer() *tipLayer {
	l := &tipLayer{bg: canvas.NewRectangle(theme.Color(theme.ColorNameOverlayBackground)), label: widget.NewLabel("")}
	l.bg.StrokeColor = theme.Color(theme.ColorNameSeparator)
	l.bg.StrokeWidth = 1
	l.bg.CornerRadius = theme.InputRadiusSize()
	l.label.Wrapping = fyne.TextWrapWord
	l.box = container.NewWithoutLayout(l.bg, l.label)
	l.box.Hide()
	l.ExtendBaseWidget(l)
	return l
}

func (l *tipLayer) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(container.NewWithoutLayout(l.box))
}

// MinSize is nothing: the layer takes the content's size.
func (l *tipLayer) MinSize() fyne.Size { return fyne.Size{} }

// show shows text in a box below at (a window position), inside the
// window.
func (l *tipLayer) show(text string, at fyne.Position) {
	l.bg.FillColor = theme.Color(theme.ColorNameOverlayBackground)
	l.bg.StrokeColor = theme.Color(theme.ColorNameSeparator)
	l.label.SetText(text)
	w := min(fyne.MeasureText(text, theme.TextSize(), fyne.TextStyle{}).Width+4*theme.Padding(), tipWidth, l.Size().Width)
	// A wrapped label is as tall as its lines at the width it has.
	l.label.Resize(fyne.NewSize(w, l.label.MinSize().Height))
	size := fyne.NewSize(w, min(l.label.MinSize().Height, max(l.Size().Height/2, 40)))
	l.label.Resize(size)
	l.bg.Resize(size)
	pos := at.AddXY(0, 24)
	if pos.X+size.Width > l.Size().Width {
		pos.X = max(l.Size().Width-size.Width, 0)
	}
	if pos.Y+size.Height > l.Size().Height {
		pos.Y = max(at.Y-size.Height-8, 0)
	}
	l.box.Move(pos)
	l.box.Resize(size)
	l.box.Show()
	l.box.Refresh()
}

func (l *tipLayer) hide() { l.box.Hide() }

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
