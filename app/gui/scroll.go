package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// newWheelScroll is a vertical scroll over content whose mouse wheel
// step is wheelBoost times fyne's (which moves about one line a notch).
// fyne gives a wheel event to the deepest scrollable under the pointer,
// so the boost sits inside the scroll, around the content; a scrollable
// inside the content (a wide hunk's sideways scroll) still takes the
// events over it.
func newWheelScroll(content fyne.CanvasObject) *container.Scroll {
	b := &boostedContent{content: content}
	b.ExtendBaseWidget(b)
	b.scroll = container.NewVScroll(b)
	return b.scroll
}

// boostedContent passes wheel events on to its scroll, made larger.
type boostedContent struct {
	widget.BaseWidget
	content fyne.CanvasObject
	scroll  *container.Scroll
}

func (b *boostedContent) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(b.content)
}

func (b *boostedContent) Scrolled(ev *fyne.ScrollEvent) {
	boosted := *ev
	boosted.Scrolled = fyne.NewDelta(ev.Scrolled.DX*wheelBoost, ev.Scrolled.DY*wheelBoost)
	b.scroll.Scrolled(&boosted)
}
