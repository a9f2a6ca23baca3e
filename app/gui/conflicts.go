package gui

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// ShowConflicts shows files the 3-way merge could not combine: per file
// the reason and, side by side, the project as it is now and the approved
// change (per conflicting stretch when the merge got that far).
func ShowConflicts(parent fyne.Window, conflicts []*review.ConflictError) {
	items := make([]*container.TabItem, 0, len(conflicts))
	for _, c := range conflicts {
		ours, theirs := string(c.Ours), string(c.Theirs)
		if c.Merge != nil && c.Merge.Conflicts() > 0 {
			var o, t strings.Builder
			for _, ch := range c.Merge.Chunks {
				if !ch.Conflict {
					continue
				}
				fmt.Fprintf(&o, "── line %d ──\n%s", ch.OursStart, ch.Ours)
				fmt.Fprintf(&t, "── line %d ──\n%s", ch.TheirsStart, ch.Theirs)
			}
			ours, theirs = o.String(), t.String()
		}
		ours, theirs = safetext.Text(ours), safetext.Text(theirs)
		sides := container.NewGridWithColumns(2,
			container.NewBorder(widget.NewLabelWithStyle("Your project now", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), nil, nil, nil,
				container.NewScroll(widget.NewLabelWithStyle(ours, fyne.TextAlignLeading, fyne.TextStyle{Monospace: true}))),
			container.NewBorder(widget.NewLabelWithStyle("The approved change", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), nil, nil, nil,
				container.NewScroll(widget.NewLabelWithStyle(theirs, fyne.TextAlignLeading, fyne.TextStyle{Monospace: true}))),
		)
		reason := widget.NewLabel(c.Reason + ": the file was left as it is; resolve it by hand or reject the change.")
		reason.Wrapping = fyne.TextWrapWord
		items = append(items, container.NewTabItem(safetext.Line(c.Path), container.NewBorder(reason, nil, nil, nil, sides)))
	}
	d := dialog.NewCustom(fmt.Sprintf("%d %s in conflict", len(conflicts), plural(len(conflicts), "file", "files")), "Close", container.NewAppTabs(items...), parent)
	d.Resize(fyne.NewSize(900, 560))
	d.Show()
}
