package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// wheelBoost multiplies a mouse wheel's step: fyne moves 25 px a notch on
// Linux and Windows (10 on macOS), about one line, where other apps move
// about three.
const wheelBoost = 2.5

// withWheel lays a wheel catcher over o: wheel events over o go to
// scrolled instead of to the scrollable under the pointer. fyne gives a
// wheel event to the last scrollable it meets under the pointer, and a
// catcher laid over o is met after all of o; it takes no taps and no
// hover. (A scrollable inside o, such as a row, would not do: fyne clips
// what is drawn to the nearest scrollable, so rows would be drawn
// outside their list.)
func withWheel(o fyne.CanvasObject, scrolled func(*fyne.ScrollEvent)) fyne.CanvasObject {
	c := &wheelCatcher{scrolled: scrolled}
	c.ExtendBaseWidget(c)
	return container.NewStack(o, c)
}

// wheelScroll lays a wheel catcher over s that scrolls it wheelBoost
// times faster. A sideways scroll inside s no longer takes the wheel.
func wheelScroll(s *container.Scroll) fyne.CanvasObject {
	return withWheel(s, func(ev *fyne.ScrollEvent) {
		boosted := *ev
		boosted.Scrolled = fyne.NewDelta(ev.Scrolled.DX*wheelBoost, ev.Scrolled.DY*wheelBoost)
		s.Scrolled(&boosted)
	})
}

// wheelList lays a wheel catcher over l that scrolls it wheelBoost
// times faster.
func wheelList(l *widget.List) fyne.CanvasObject {
	return withWheel(l, func(ev *fyne.ScrollEvent) {
		l.ScrollToOffset(max(l.GetScrollOffset()-ev.Scrolled.DY*wheelBoost, 0))
	})
}

// wheelCatcher takes wheel events and nothing else; it draws nothing.
type wheelCatcher struct {
	widget.BaseWidget
	scrolled func(*fyne.ScrollEvent)
}

func (c *wheelCatcher) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(container.NewWithoutLayout())
}

func (c *wheelCatcher) MinSize() fyne.Size { return fyne.Size{} }

func (c *wheelCatcher) Scrolled(ev *fyne.ScrollEvent) { c.scrolled(ev) }
