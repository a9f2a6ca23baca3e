package gui

import (
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// CompareWindow shows the attempts of a fan-out side by side (status,
// exit code, files and lines changed, rationale), each with a button that
// opens its review: pick the best one and review it.
type CompareWindow struct {
	Window fyne.Window
	Rows   []sandbox.Comparison
	// Review holds one button per row, in order.
	Review []*widget.Button
}

// compareHeader names the columns: Comparison.Cells, then the Review
// button; compareWidths are the widths of all but the rationale, which
// takes the rest of the window.
var (
	compareHeader = []string{"#", "Sandbox", "Agent", "Status", "Exit", "Verify", "Files", "Lines", "Rationale", ""}
	compareWidths = []float32{32, 92, 120, 170, 44, 100, 50, 90}
)

// compareRow lays out one row: the fixed-width cells, the rationale in
// what is left, then end (the Review button) at the right. A cell cut
// short shows its whole text in a tooltip.
func compareRow(cells []string, style fyne.TextStyle, end fyne.CanvasObject) fyne.CanvasObject {
	left := container.NewHBox()
	last := len(cells) - 1
	for i, text := range cells[:last] {
		left.Add(container.NewGridWrap(fyne.NewSize(compareWidths[i], 36), newTipLabel(text, style)))
	}
	return container.NewBorder(nil, nil, left, end, newTipLabel(cells[last], style))
}

// NewCompareWindow loads the sandboxes that ids name (a group ID names
// every attempt of a fan-out) and builds the window (not shown); review
// is called with the sandbox picked.
func NewCompareWindow(a fyne.App, svc CompareService, title string, ids []string, review func(id string)) (*CompareWindow, error) {
	rows, err := svc.Compare(ids)
	if err != nil {
		return nil, err
	}
	c := &CompareWindow{Window: a.NewWindow(title), Rows: rows}
	list := container.NewVBox()
	// The header's last cell keeps a Review button's room, unseen.
	spacer := widget.NewButtonWithIcon("Review", theme.VisibilityIcon(), nil)
	spacer.Hide()
	list.Add(compareRow(compareHeader[:len(compareHeader)-1], fyne.TextStyle{Bold: true}, container.NewStack(spacer)))
	for _, r := range rows {
		cells := r.Cells()
		last := len(cells) - 1 // the rationale; the lines changed before it
		cells[last-1] = strings.Replace(cells[last-1], " -", " −", 1)
		for i := range cells {
			cells[i] = safetext.Line(cells[i]) // the rationale is the agent's
		}
		id := r.ID
		btn := widget.NewButtonWithIcon("Review", theme.VisibilityIcon(), func() { review(id) })
		if r.Status != sandbox.StatusReady && r.Status != sandbox.StatusApplied {
			btn.Disable()
		}
		c.Review = append(c.Review, btn)
		list.Add(widget.NewSeparator())
		list.Add(compareRow(cells, fyne.TextStyle{}, btn))
	}
	hint := widget.NewLabelWithStyle("Attempts from one snapshot of the project. Review the one you prefer, then apply all of it or some hunks. To take hunks from several attempts, apply them one after another: each apply merges onto what you already applied.",
		fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
	hint.Wrapping = fyne.TextWrapWord
	// In a box: the rows keep their height in a tall window, not a
	// share of it each.
	c.Window.SetContent(withTips(container.NewBorder(hint, nil, nil, nil, container.NewVScroll(list))))
	c.Window.Resize(fyne.NewSize(1000, 140+60*float32(len(rows))))
	return c, nil
}
