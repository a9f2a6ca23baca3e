package gui

import (
	"fmt"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// The main window's sandbox list: a table row per sandbox (project,
// agent and task, state, elapsed, changes, progress, the row's buttons),
// its flexible columns fitted to the window, and the texts its cells
// show.

// Columns of the sandbox table: titles and widths. A zero width is a
// flexible column: they share what the window has beyond the fixed ones,
// by their weight.
var (
	columns      = []string{"Sandbox", "Project", "Agent", "Task", "State", "Elapsed", "Changes", "Progress", ""}
	columnWidths = []float32{92, 0, 130, 0, 235, 64, 120, 85, 128}
	columnFlex   = []float32{0, 0.4, 0, 0.6, 0, 0, 0, 0, 0}
)

// Table columns that code refers to.
const (
	colState   = 4
	colActions = 8
)

// minFlexWidth is the narrowest a flexible column gets.
const minFlexWidth = 100

// fittedTable lays out the sandbox table, fitting its flexible columns
// to the width it gets.
type fittedTable struct{ w *MainWindow }

func (l fittedTable) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	l.w.fitColumns(size.Width)
	for _, o := range objs {
		o.Resize(size)
		o.Move(fyne.NewPos(0, 0))
	}
}

func (l fittedTable) MinSize(objs []fyne.CanvasObject) fyne.Size {
	// Narrow: the window's width is the user's; the table scrolls.
	return fyne.NewSize(200, objs[0].MinSize().Height)
}

// fitColumns gives the flexible columns what width leaves beyond the
// fixed ones.
func (w *MainWindow) fitColumns(width float32) {
	if width == w.tableWidth {
		return
	}
	w.tableWidth = width
	var fixed float32
	for _, cw := range columnWidths {
		fixed += cw
	}
	// Each column has a gap after it; the scroll bar needs room.
	spare := width - fixed - w.columnMargin()
	for i, f := range columnFlex {
		if f > 0 {
			w.table.SetColumnWidth(i, max(spare*f, minFlexWidth))
		}
	}
}

// columnMargin is the table's width that is no column's: the gap the
// table leaves after each column (a padding, its separator drawn in it),
// and room for the vertical scroll bar.
func (w *MainWindow) columnMargin() float32 {
	return float32(len(columns))*theme.Padding() + 2*theme.Padding() + theme.ScrollBarSize()
}

// ColumnWidth is the width of table column i, for tests.
func (w *MainWindow) ColumnWidth(i int) float32 {
	if columnFlex[i] == 0 {
		return columnWidths[i]
	}
	var fixed float32
	for _, cw := range columnWidths {
		fixed += cw
	}
	spare := w.tableWidth - fixed - w.columnMargin()
	return max(spare*columnFlex[i], minFlexWidth)
}

// cell is one table cell's widgets: a label, a progress bar, or the
// row's actions. The label cuts its text at a word, whole in a tooltip.
type cell struct {
	label                   *fitLabel
	bar                     *widget.ProgressBar
	actions                 *fyne.Container
	folder, transcript, del *tipButton
}

func (w *MainWindow) newCell() fyne.CanvasObject {
	c := &cell{label: newFitLabel("", fyne.TextStyle{}), bar: widget.NewProgressBar()}
	c.bar.Hide()
	c.folder = newTipButton("", theme.FolderOpenIcon(), "Open the project folder", nil)
	c.transcript = newTipButton("", theme.DocumentIcon(), "Show what the run printed (its transcript)", nil)
	c.del = newTipButton("", theme.DeleteIcon(), "Discard this sandbox and its changes", nil)
	for _, b := range []*tipButton{c.folder, c.transcript, c.del} {
		b.Importance = widget.LowImportance
	}
	c.actions = container.NewHBox(c.folder, c.transcript, c.del)
	c.actions.Hide()
	return container.NewStack(c.label, c.bar, c.actions)
}

// cellOf is what newCell put in o.
func cellOf(o fyne.CanvasObject) *cell {
	objs := o.(*fyne.Container).Objects
	actions := objs[2].(*fyne.Container)
	return &cell{label: objs[0].(*fitLabel), bar: objs[1].(*widget.ProgressBar), actions: actions,
		folder: actions.Objects[0].(*tipButton), transcript: actions.Objects[1].(*tipButton), del: actions.Objects[2].(*tipButton)}
}

// newTable is the sandbox table: a row per sandbox, its columns fitted
// to the window.
func (w *MainWindow) newTable() *widget.Table {
	t := widget.NewTableWithHeaders(
		func() (int, int) {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.infos), len(columns)
		},
		w.newCell,
		w.updateCell,
	)
	t.ShowHeaderColumn = false
	t.CreateHeader = func() fyne.CanvasObject {
		return widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	}
	t.UpdateHeader = func(id widget.TableCellID, o fyne.CanvasObject) {
		if id.Row < 0 && id.Col >= 0 {
			o.(*widget.Label).SetText(columns[id.Col])
		}
	}
	for i, cw := range columnWidths {
		if cw > 0 {
			t.SetColumnWidth(i, cw)
		}
	}
	t.OnSelected = func(id widget.TableCellID) {
		t.UnselectAll()
		if id.Col != colActions {
			w.open(id.Row)
		}
	}
	return t
}

func (w *MainWindow) updateCell(id widget.TableCellID, o fyne.CanvasObject) {
	c := cellOf(o)
	info, run, ok := w.row(id.Row)
	if !ok {
		return
	}
	c.label.Show()
	c.bar.Hide()
	c.actions.Hide()
	c.label.setStyle(fyne.TextStyle{Monospace: id.Col == 0})
	c.label.Tip = ""
	c.label.onTap = func() { w.table.Select(id) } // a tap on the text is one on its row
	who, task := w.describe(info.Meta)
	switch id.Col {
	case 0:
		c.label.SetText(info.ID)
	case 1:
		c.label.Tip = info.Project
		c.label.SetText(projectName(info.Project))
	case 2:
		c.label.SetText(who)
	case 3:
		c.label.Tip = info.Prompt
		c.label.SetText(task)
	case colState:
		st := statusText(info)
		if run != nil && info.Status.Active() && run.progress.Message != "" {
			st = safetext.Line(run.progress.Message)
		}
		note := excludedNote(info)
		stage, stageTip := stageText(info)
		if stage != "" {
			st += "  ·  " + stage
			note = strings.TrimSpace(stageTip + "\n" + note)
		}
		if excludedNote(info) != "" {
			st += fmt.Sprintf("  ·  %d %s left out", len(info.Secrets), plural(len(info.Secrets), "secret", "secrets"))
		}
		if info.Error != "" && info.StatusText() != "stopped" {
			note = strings.TrimSpace(safetext.Line(info.Error) + "\n" + note)
		}
		if note != "" {
			c.label.Tip = st + "\n" + note
		}
		c.label.SetText(st)
	case 5:
		c.label.SetText(elapsed(info, w.now()))
	case 6:
		c.label.SetText(changesText(info))
	case 7:
		frac, show := progressOf(info, run)
		if show {
			c.label.Hide()
			c.bar.SetValue(frac)
			c.bar.Show()
		} else {
			c.label.SetText("")
		}
	case colActions:
		c.label.Hide()
		c.actions.Show()
		id := info.ID
		project := info.Project
		c.folder.OnTapped = func() { w.OpenFolder(project) }
		c.transcript.OnTapped = func() { w.OpenTranscript(id) }
		c.del.OnTapped = func() { w.Discard(id) }
		running := info.Status.Active() && info.Live
		setEnabled(c.del, !running)
		setEnabled(c.transcript, !running)
		setEnabled(c.folder, project != "")
	}
}

func setEnabled(b *tipButton, on bool) {
	if on {
		b.Enable()
	} else {
		b.Disable()
	}
}

// describe is who ran in a sandbox and on what, for people: the agent's
// name (its preset's description) and the user's prompt (its first line);
// a script's name and the prompt; a command's line and the prompt.
func (w *MainWindow) describe(m sandbox.Meta) (who, task string) {
	return describeRun(m, w.agentTitle), firstLine(m.Prompt)
}

// agentTitle is the name of agent preset name for people: the run
// dialog's, without its notes.
func (w *MainWindow) agentTitle(name string) string { return agentTitle(w.presets, name) }

func elapsed(info sandbox.Info, now time.Time) string {
	var d time.Duration
	switch {
	case info.Status.Active() && info.Live:
		d = now.Sub(info.Created)
	case info.Timings.TotalMS > 0:
		d = time.Duration(info.Timings.TotalMS) * time.Millisecond
	default:
		return ""
	}
	return formatDuration(d)
}

func formatDuration(d time.Duration) string {
	d = max(d.Round(time.Second), 0)
	if d < time.Hour {
		return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

func changesText(info sandbox.Info) string {
	c := info.Changes
	if c == nil {
		return ""
	}
	if c.Files == 0 {
		return "none"
	}
	return fmt.Sprintf("%d %s +%d −%d", c.Files, plural(c.Files, "file", "files"), c.LinesAdded, c.LinesRemoved)
}
