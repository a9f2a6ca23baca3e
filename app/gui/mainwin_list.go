package gui

import (
	"fmt"
	"os"
	"path/filepath"
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

// agentTitle is the name for people of agent preset name among presets
// (name itself when none is that preset).
func agentTitle(presets []Preset, name string) string {
	for _, p := range presets {
		if p.Agent == name {
			return p.Title()
		}
	}
	return name
}

// describeRun is what a sandbox ran, for people: the agent's name
// (title gives it), the script's file name, or the command line.
func describeRun(m sandbox.Meta, title func(agent string) string) string {
	switch {
	case m.Agent != "":
		return title(m.Agent)
	case m.ScriptName != "":
		return safetext.Line(m.ScriptName)
	case len(m.Command) == 3 && m.Command[0] == "sh" && m.Command[1] == "-c":
		return safetext.Line(m.Command[2]) // a shell line, as typed
	}
	return safetext.Line(strings.Join(m.Command, " "))
}

// firstLine is the first non-blank line of s.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return safetext.Line(l)
		}
	}
	return ""
}

// excludedNote names the files a sandbox's snapshot left out because
// they look like secrets ("" when none): they never reached the VM.
func excludedNote(info sandbox.Info) string {
	return secretsNote(info.Secrets)
}

// secretsNote names secret paths left out of a copy, the first few by
// name.
func secretsNote(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	const shown = 4
	names := make([]string, 0, shown)
	for _, p := range paths[:min(len(paths), shown)] {
		names = append(names, safetext.Line(p))
	}
	s := "Not copied into the sandbox, " + plural(len(paths), "looks like a secret", "look like secrets") + ": " + strings.Join(names, ", ")
	if len(paths) > shown {
		s += fmt.Sprintf(" and %d more (airlock logs --audit lists them)", len(paths)-shown)
	}
	return s
}

// statusText is a sandbox's state for people. A run whose process is gone
// (the VM died with it, or the process was killed) says so.
func statusText(info sandbox.Info) string {
	if info.Status.Active() && !info.Live {
		return "stopped: its VM is gone (was " + string(info.Status) + ")"
	}
	if info.Status == sandbox.StatusReady && info.ExitCode != nil && *info.ExitCode != 0 {
		return fmt.Sprintf("ready for review (exit %d)", *info.ExitCode)
	}
	return info.StatusText()
}

// runTitle is what a sandbox ran, for a header line: the agent (or
// script, or command line) and the user's prompt's first line, never the
// agent's command template (presets name the agents).
func runTitle(m sandbox.Meta, presets []Preset) string {
	who := describeRun(m, func(a string) string { return agentTitle(presets, a) })
	if task := firstLine(m.Prompt); task != "" {
		return who + ": " + task
	}
	return who
}

// projectName is a project's folder name, then where it is.
func projectName(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Base(p) + "  ·  " + shortPath(filepath.Dir(p))
}

// shortPath shows a path with the home directory as ~.
func shortPath(p string) string {
	if home, err := os.UserHomeDir(); err == nil && home != "/" && strings.HasPrefix(p, home+"/") {
		return "~" + p[len(home):]
	}
	return p
}

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

// shortCommit is a commit's ID as git shows it short.
func shortCommit(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// stageText is a sandbox's stage beyond its state, for the main window
// ("committed", "pushed"; "" while the changes are in the sandbox or the
// working tree, which the state says), and the commit and branch for its
// tooltip.
func stageText(info sandbox.Info) (word, tip string) {
	p := info.Promotion
	if p == nil || (info.Stage != sandbox.StageCommitted && info.Stage != sandbox.StagePushed) {
		return "", ""
	}
	word = string(info.Stage)
	tip = "Committed " + shortCommit(p.Commit)
	switch {
	case p.NewBranch:
		tip += " on the new branch " + safetext.Line(p.Branch)
	case p.Branch != "":
		tip += " on " + safetext.Line(p.Branch)
	}
	if !p.Time.IsZero() {
		tip += ", " + p.Time.Local().Format("2 Jan 15:04")
	}
	if info.Stage == sandbox.StagePushed {
		tip += "; pushed"
		if p.Remote != "" {
			tip += " to " + safetext.Line(p.Remote)
		}
		if p.PullRequest != "" {
			tip += "; pull request " + safetext.Line(p.PullRequest)
		}
	}
	return word, tip
}
