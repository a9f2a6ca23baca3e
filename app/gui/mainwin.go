package gui

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// MainWindow lists the sandboxes and starts runs: drop a project folder
// on it, type or browse to one, or try the demo.
type MainWindow struct {
	Window  fyne.Window
	app     fyne.App
	svc     AppService
	presets []Preset
	now     func() time.Time

	mu    sync.Mutex
	infos []sandbox.Info
	runs  map[string]*runState // runs started by this window, by sandbox ID

	table   *widget.Table
	message *widget.Label
	// Folder is the project folder to run on: typed, browsed to, or one
	// of the recent projects.
	Folder *widget.SelectEntry
	// empty is shown instead of the list while there is no sandbox: the
	// large drop zone and Try the demo; slim is the drop zone above the
	// list.
	empty, list *fyne.Container
	// TryDemo runs the demo agent on a fresh copy of the demo project.
	TryDemo *widget.Button
	// dialog is the open run dialog, if any.
	dialog *RunDialog
	// reviews are the open review windows, by sandbox ID.
	reviews map[string]*ReviewWindow
	// async runs slow work (a run) off fyne's goroutine; tests make it
	// synchronous.
	async func(func())
	// home is the Airlock home (UseHome): the remembered choices and the
	// demo's copies live there. prefs are those choices.
	home  string
	prefs Prefs
	// openURL opens a folder in the desktop's file manager.
	openURL func(*url.URL) error
	// confirm asks before something is thrown away; tests answer it.
	confirm func(title, msg string, yes func())
	// tableWidth is the width the columns were last fitted to.
	tableWidth float32
}

// goAsync runs f on a new goroutine.
func goAsync(f func()) { go f() }

// runState is what the main window knows of a run it started.
type runState struct {
	progress pipeline.Progress
	view     *RunView
}

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

// demoPrompt is the task Try the demo gives the demo agent.
const demoPrompt = "Plan stop words for the counter"

// NewMainWindow builds the main window (not shown) and loads the list.
func NewMainWindow(a fyne.App, svc AppService, presets []Preset) *MainWindow {
	w := &MainWindow{
		Window: a.NewWindow("Airlock"), app: a, svc: svc, presets: presets, now: time.Now,
		runs: map[string]*runState{}, reviews: map[string]*ReviewWindow{}, async: goAsync, openURL: a.OpenURL,
	}
	w.confirm = func(title, msg string, yes func()) {
		dialog.ShowConfirm(title, msg, func(ok bool) {
			if ok {
				yes()
			}
		}, w.Window)
	}
	w.build()
	w.Window.SetOnDropped(func(_ fyne.Position, uris []fyne.URI) {
		paths := make([]string, 0, len(uris))
		for _, u := range uris {
			paths = append(paths, u.Path())
		}
		w.Drop(paths)
	})
	w.Window.Resize(fyne.NewSize(1280, 640))
	w.Reload()
	return w
}

// UseHome keeps the app's choices (the run dialog's last ones, recent
// projects) in the Airlock home dir, and the demo's project copies under
// it. Without it nothing is remembered and the demo cannot start.
func (w *MainWindow) UseHome(dir string) {
	w.home = dir
	p, err := loadPrefs(w.prefsPath())
	if err != nil {
		w.showMessage(err.Error() + " (the app starts without its remembered choices)")
	}
	w.prefs = p
	w.Folder.SetOptions(p.Recent)
}

func (w *MainWindow) prefsPath() string {
	if w.home == "" {
		return ""
	}
	return filepath.Join(w.home, PrefsFile)
}

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

func (w *MainWindow) build() {
	w.table = widget.NewTableWithHeaders(
		func() (int, int) {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.infos), len(columns)
		},
		w.newCell,
		w.updateCell,
	)
	w.table.ShowHeaderColumn = false
	w.table.CreateHeader = func() fyne.CanvasObject {
		return widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	}
	w.table.UpdateHeader = func(id widget.TableCellID, o fyne.CanvasObject) {
		if id.Row < 0 && id.Col >= 0 {
			o.(*widget.Label).SetText(columns[id.Col])
		}
	}
	for i, cw := range columnWidths {
		if cw > 0 {
			w.table.SetColumnWidth(i, cw)
		}
	}
	w.table.OnSelected = func(id widget.TableCellID) {
		w.table.UnselectAll()
		if id.Col != colActions {
			w.open(id.Row)
		}
	}

	w.Folder = widget.NewSelectEntry(nil)
	w.Folder.SetPlaceHolder("Project folder: type its path, Browse…, or drop it on the window")
	w.Folder.OnSubmitted = func(string) { w.RunFolder() }
	browse := widget.NewButtonWithIcon("Browse…", theme.FolderOpenIcon(), w.browse)
	newRun := widget.NewButtonWithIcon("New run…", theme.ContentAddIcon(), w.RunFolder)
	newRun.Importance = widget.HighImportance
	w.TryDemo = widget.NewButtonWithIcon("Try the demo", theme.MediaPlayIcon(), w.StartDemo)
	refresh := newTipButton("", theme.ViewRefreshIcon(), "Read the sandbox list again", w.Reload)
	top := container.NewBorder(nil, nil, nil, container.NewHBox(browse, newRun, widget.NewSeparator(), w.TryDemo, refresh), w.Folder)

	w.message = widget.NewLabel("")
	w.message.Wrapping = fyne.TextWrapWord
	w.message.Hide()

	// No sandbox yet: a large drop zone that says what Airlock does, and
	// the demo, which needs nothing set up.
	icon := widget.NewIcon(theme.FolderOpenIcon())
	bigIcon := container.NewCenter(container.NewGridWrap(fyne.NewSize(64, 64), icon))
	title := widget.NewLabelWithStyle("Drop a project folder here", fyne.TextAlignCenter, fyne.TextStyle{Bold: true})
	title.SizeName = theme.SizeNameSubHeadingText
	// Two lines, not one wrapped label: a wrapped label's height is
	// known only once it has a width, and the zone is centred by it.
	what := widget.NewLabelWithStyle("An agent works on a copy of it in a throwaway VM.", fyne.TextAlignCenter, fyne.TextStyle{})
	what2 := widget.NewLabelWithStyle("You review every change, file by file and hunk by hunk, before any of it reaches your folder.", fyne.TextAlignCenter, fyne.TextStyle{})
	demo := widget.NewButtonWithIcon("Try the demo", theme.MediaPlayIcon(), w.StartDemo)
	demo.Importance = widget.HighImportance
	demoWhat := widget.NewLabelWithStyle("The demo agent (no API key) works on a small example project copied for it.", fyne.TextAlignCenter, fyne.TextStyle{Italic: true})
	demoWhat.Truncation = fyne.TextTruncateEllipsis
	what.Truncation, what2.Truncation = fyne.TextTruncateEllipsis, fyne.TextTruncateEllipsis
	emptyBody := container.NewVBox(bigIcon, title, container.NewVBox(what, what2), container.NewCenter(demo), demoWhat)
	// As wide as its text, which is cut (not wrapped) in a narrower window.
	w.empty = container.NewPadded(newDropZone(container.NewCenter(container.NewGridWrap(fyne.NewSize(620, emptyBody.MinSize().Height), emptyBody))))

	slimText := widget.NewLabel("Drop a project folder here to run an agent on a copy of it. Select a sandbox to review or watch it.")
	slimText.Truncation = fyne.TextTruncateEllipsis
	slim := newDropZone(container.NewBorder(nil, nil, widget.NewIcon(theme.FolderOpenIcon()), nil, slimText))
	w.list = container.NewBorder(slim, nil, nil, nil, container.New(fittedTable{w}, w.table))
	w.list.Hide()

	w.Window.SetContent(withTips(container.NewBorder(top, w.message, nil, nil, container.NewStack(w.empty, w.list))))
}

// browse picks the project folder in a folder dialog.
func (w *MainWindow) browse() {
	d := dialog.NewFolderOpen(func(dir fyne.ListableURI, err error) {
		if err != nil {
			w.showMessage(err.Error())
			return
		}
		if dir != nil {
			w.Folder.SetText(dir.Path())
			w.Drop([]string{dir.Path()})
		}
	}, w.Window)
	if p := expandHome(strings.TrimSpace(w.Folder.Text)); p != "" {
		if u, err := storage.ListerForURI(storage.NewFileURI(p)); err == nil {
			d.SetLocation(u)
		}
	}
	d.Resize(fyne.NewSize(900, 600))
	d.Show()
}

// RunFolder opens the run dialog for the folder typed (or chosen) in
// Folder, or asks for one.
func (w *MainWindow) RunFolder() {
	p := expandHome(strings.TrimSpace(w.Folder.Text))
	if p == "" {
		w.browse()
		return
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	w.Drop([]string{p})
}

// expandHome turns a leading ~ into the home directory.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

// Reload reads the sandbox list from the service.
func (w *MainWindow) Reload() {
	infos, err := w.svc.List()
	if err != nil {
		w.showMessage("Cannot list the sandboxes: " + err.Error())
		return
	}
	w.mu.Lock()
	w.infos = infos
	w.mu.Unlock()
	if len(infos) == 0 {
		w.list.Hide()
		w.empty.Show()
	} else {
		w.empty.Hide()
		w.list.Show()
	}
	w.table.Refresh()
}

// Follow keeps the list in step with the sandbox store at dir: runs that
// other processes (the CLI) start, and every status they write, reload it
// through file-system notifications, until ctx ends or stop is called
// (stop waits for the watching to end). It fails when notifications
// cannot be set up; Tick(true) is then the way to see such changes.
func (w *MainWindow) Follow(ctx context.Context, dir string) (stop func(), err error) {
	sw := newStoreWatcher(dir, func() { fyne.Do(w.Reload) })
	if err := sw.Start(ctx); err != nil {
		return nil, err
	}
	return sw.Close, nil
}

// Live says whether a listed sandbox has a process running it. A process
// that dies without a word (killed) writes nothing that Follow would see:
// only its run lock, released, tells, so a reload now and then does.
func (w *MainWindow) Live() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, in := range w.infos {
		if in.Live {
			return true
		}
	}
	return false
}

// Tick refreshes what changes with time (elapsed, progress; a clock, not
// a read of the store) and, with reload, re-reads the list.
func (w *MainWindow) Tick(reload bool) {
	now := w.now()
	w.mu.Lock()
	var views []*RunView
	for _, r := range w.runs {
		if r.view != nil {
			views = append(views, r.view)
		}
	}
	w.mu.Unlock()
	for _, v := range views {
		v.Tick(now)
	}
	if reload {
		w.Reload()
		return
	}
	w.table.Refresh()
}

// showMessage shows s on the message line, which takes no room while
// there is nothing to say. Errors may quote guest paths.
func (w *MainWindow) showMessage(s string) {
	w.message.SetText(safetext.Text(s))
	if s == "" {
		w.message.Hide()
	} else {
		w.message.Show()
	}
}

// Message is the text of the window's message line, for tests.
func (w *MainWindow) Message() string { return w.message.Text }

func (w *MainWindow) row(i int) (sandbox.Info, *runState, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i < 0 || i >= len(w.infos) {
		return sandbox.Info{}, nil, false
	}
	info := w.infos[i]
	return info, w.runs[info.ID], true
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

// OpenFolder shows a project folder in the desktop's file manager.
func (w *MainWindow) OpenFolder(project string) {
	if err := w.openURL(&url.URL{Scheme: "file", Path: project}); err != nil {
		w.showMessage(fmt.Sprintf("Cannot open %s: %v", project, err))
	}
}

// Discard removes a sandbox, once the user confirms it.
func (w *MainWindow) Discard(id string) {
	info, ok := w.info(id)
	if !ok {
		return
	}
	msg := fmt.Sprintf("Sandbox %s (%s) and its changes are thrown away, with its transcript and audit log.", id, projectName(info.Project))
	if info.Status == sandbox.StatusApplied {
		msg += "\nWhat you applied stays in your project, but can no longer be undone."
	} else {
		msg += "\nYour project folder is not touched."
	}
	w.confirm("Discard sandbox "+id+"?", msg, func() {
		if err := w.svc.Discard(id); err != nil {
			w.showMessage(fmt.Sprintf("Cannot discard %s: %v", id, err))
			return
		}
		if r, ok := w.reviews[id]; ok {
			r.Window.Close()
		}
		w.showMessage("Discarded sandbox " + id + ".")
		w.Reload()
	})
}

// OpenTranscript opens a window with what a sandbox's run printed, with
// how it ended.
func (w *MainWindow) OpenTranscript(id string) fyne.Window {
	info, _ := w.info(id)
	b, err := w.svc.Transcript(id)
	if err != nil {
		w.showMessage(fmt.Sprintf("Cannot read the transcript of %s: %v", id, err))
		return nil
	}
	win := w.app.NewWindow("Transcript of " + id + ": " + filepath.Base(info.Project))
	head := newFitLabel(fmt.Sprintf("%s  ·  %s  ·  %s", projectName(info.Project), describeRun(info.Meta, w.agentTitle), statusText(info)), fyne.TextStyle{Bold: true})
	top := container.NewVBox(head)
	switch {
	case info.StatusText() == "stopped":
		top.Add(newFitLabel("Stopped before it ended (Stop, or Ctrl-C in a terminal): this is what it printed until then.", fyne.TextStyle{Italic: true}))
	case info.Error != "":
		e := newFitLabel(safetext.Line(info.Error), fyne.TextStyle{})
		e.label.Importance = widget.DangerImportance
		top.Add(e)
	}
	if note := excludedNote(info); note != "" {
		top.Add(newFitLabel(note, fyne.TextStyle{}))
	}
	text := widget.NewLabelWithStyle(plainTranscript(b), fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
	win.SetContent(withTips(container.NewBorder(top, nil, nil, nil, wheelScroll(container.NewScroll(text)))))
	win.Resize(fyne.NewSize(960, 640))
	win.Show()
	return win
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

// open opens what a row is for: the review of a finished sandbox, the
// run view of a run this window started.
func (w *MainWindow) open(row int) {
	info, run, ok := w.row(row)
	if !ok {
		return
	}
	switch {
	case run != nil && run.view != nil && info.Status.Active():
		run.view.Window.Show()
		run.view.Window.RequestFocus()
	case info.Group != "" && (info.Status == sandbox.StatusReady || info.Status == sandbox.StatusApplied):
		w.OpenCompare(info.Group)
	case info.Status == sandbox.StatusReady || info.Status == sandbox.StatusApplied:
		w.OpenReview(info)
	default:
		msg := fmt.Sprintf("Sandbox %s is %s.", info.ID, statusText(info))
		if info.Error != "" {
			msg += " " + info.Error
		}
		w.showMessage(msg)
	}
}

// OpenCompare opens the compare window of a fan-out's attempts; its
// Review buttons open each attempt's review window.
func (w *MainWindow) OpenCompare(group string) *CompareWindow {
	c, err := NewCompareWindow(w.app, w.svc, "Compare attempts of "+group, []string{group}, func(id string) {
		if info, ok := w.info(id); ok {
			w.OpenReview(info)
		}
	})
	if err != nil {
		w.showMessage(fmt.Sprintf("Cannot compare %s: %v", group, err))
		return nil
	}
	c.Window.Show()
	return c
}

// reopenReview replaces r by a new review window of the same sandbox,
// once a reply round is ready, showing what that round changed.
func (w *MainWindow) reopenReview(r *ReviewWindow) {
	infos, err := w.svc.List()
	if err != nil {
		w.showMessage("Cannot list the sandboxes: " + err.Error())
		return
	}
	for _, info := range infos {
		if info.ID == r.id {
			// The round's live output goes with the old window: its
			// transcript is in the new one's Transcript tab, in front if
			// the user was watching the round.
			watching := r.watchingLiveRound()
			r.Window.Close()
			delete(w.reviews, r.id)
			if nr := w.OpenReview(info); nr != nil {
				if nr.view != nil {
					nr.view.SetSelectedIndex(1)
				}
				nr.roundReady(watching)
			}
			return
		}
	}
}

// OpenReview opens (or raises) the review window of a sandbox.
func (w *MainWindow) OpenReview(info sandbox.Info) *ReviewWindow {
	if r, ok := w.reviews[info.ID]; ok {
		r.Window.Show()
		r.Window.RequestFocus()
		return r
	}
	r, err := NewReviewWindow(w.app, w.svc, info)
	if err != nil {
		w.showMessage(fmt.Sprintf("Cannot review %s: %v", info.ID, err))
		return nil
	}
	r.SetPresets(w.presets)
	r.onChange = func() { r.Reload(); w.Reload() }
	r.onRound = func() { w.reopenReview(r) }
	r.async = w.async
	w.reviews[info.ID] = r
	r.Window.SetOnClosed(func() { delete(w.reviews, info.ID) })
	r.Window.Show()
	return r
}

// Drop handles paths dropped on the window (or picked with New run…):
// one readable folder opens the run dialog for it; anything else says
// why not, and the app carries on.
func (w *MainWindow) Drop(paths []string) {
	switch {
	case len(paths) == 0:
		return
	case len(paths) > 1:
		w.showMessage(fmt.Sprintf("%d items were dropped: drop one project folder at a time.", len(paths)))
		return
	}
	if err := CheckProject(paths[0]); err != nil {
		w.showMessage(err.Error())
		dialog.ShowInformation("Cannot run on this", err.Error(), w.Window)
		return
	}
	w.showMessage("")
	o := RunDialogOptions{CheckImage: w.svc.CheckImage, Last: w.prefs}
	setup, err := w.svc.RunSetup(paths[0])
	if err != nil {
		// The dialog still opens: its limits say "as in settings".
		w.showMessage("Cannot read the settings for this project: " + err.Error())
	}
	o.Setup = setup
	w.dialog = NewRunDialog(w.Window, paths[0], w.presets, o, w.start)
	w.dialog.Show()
}

// StartDemo copies the demo project (examples/demo-project, beside the
// demo agent's script) to a fresh folder in the Airlock home and starts
// the demo agent on it: no API key, nothing of the user's is touched.
// The run dialog stays open if the run cannot start (an image to build).
func (w *MainWindow) StartDemo() {
	src := w.demoProject()
	switch {
	case src == "":
		w.showMessage("The demo project (examples/demo-project) was not found beside airlock or in the working directory: start airlock from its folder, or drop a project folder of yours.")
		return
	case w.home == "":
		w.showMessage("The demo needs Airlock's home folder to copy its project into.")
		return
	}
	dst := filepath.Join(w.home, "demo", "wordfreq-"+w.now().Format("20060102-150405"))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		w.showMessage("Cannot make a folder for the demo project: " + err.Error())
		return
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		w.showMessage("Cannot copy the demo project: " + err.Error())
		return
	}
	w.Drop([]string{dst})
	d := w.dialog
	if d == nil {
		return
	}
	i := slices.IndexFunc(w.presets, func(p Preset) bool { return p.Agent == demoAgent })
	if i < 0 {
		i = slices.IndexFunc(w.presets, func(p Preset) bool { return p.Script != "" && p.Unavailable == "" })
	}
	if i < 0 {
		d.Error.SetText("The demo agent is not among the agents offered here.")
		return
	}
	d.Preset.SetSelectedIndex(i)
	d.selectImage(MinimalImage)
	d.Prompt.SetText(demoPrompt)
	d.Start()
}

// demoProject is the demo project's folder: examples/demo-project beside
// the demo script's ("" when not found).
func (w *MainWindow) demoProject() string {
	for _, p := range w.presets {
		if p.Script == "" {
			continue
		}
		dir := filepath.Join(filepath.Dir(p.Script), "demo-project")
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
	}
	return ""
}

// Startup is what to open once the main window is up.
type Startup struct {
	// Project opens the run dialog for a folder, as a drop does; with
	// Start, the run starts at once with the first usable preset.
	Project string
	Start   bool
	// Review opens the review window of this sandbox ID, at File if set.
	Review string
	File   string
	// Notice, if set, is shown on the message line (e.g. why the user's
	// agents.toml was left out).
	Notice string
}

// Open opens what s asks for.
func (w *MainWindow) Open(s Startup) {
	if s.Notice != "" {
		w.showMessage(s.Notice)
	}
	if s.Review != "" {
		if info, ok := w.info(s.Review); ok {
			if r := w.OpenReview(info); r != nil && s.File != "" {
				r.ShowFile(s.File)
			}
		} else {
			w.showMessage("No sandbox " + s.Review + " to review.")
		}
	}
	if s.Project != "" {
		w.Drop([]string{s.Project})
		if s.Start && w.dialog != nil {
			w.dialog.Start()
		}
	}
}

// RunDialog is the open run dialog, for tests.
func (w *MainWindow) RunDialog() *RunDialog { return w.dialog }

// start begins a run from the dialog's request, in a new run view.
func (w *MainWindow) start(req RunRequest) {
	if w.dialog != nil {
		c := w.dialog.Choices()
		c.Recent = w.prefs.Recent
		c.addRecent(req.Project)
		w.prefs = c
		w.Folder.SetOptions(c.Recent)
		if err := savePrefs(w.prefsPath(), c); err != nil {
			w.showMessage(err.Error())
		}
	}
	if req.AgentName == "" && req.Agent != "" {
		req.AgentName = w.agentTitle(req.Agent)
	}
	view := NewRunView(w.app, req)
	ctx, cancel := context.WithCancel(context.Background())
	view.stop = cancel
	req.Output, req.Input, req.TTY = view.term, view.term.Input(), view.term.TTY()
	var id string
	req.Progress = func(p pipeline.Progress) {
		fyne.Do(func() {
			if p.Step == pipeline.StepCreated {
				id = p.Sandbox
				w.mu.Lock()
				w.runs[id] = &runState{view: view}
				w.mu.Unlock()
				w.Reload()
			}
			if id != "" {
				w.mu.Lock()
				w.runs[id].progress = p
				w.mu.Unlock()
				w.table.Refresh()
			}
			view.progress(p)
		})
	}
	view.Window.Show()
	w.async(func() {
		res, err := w.svc.Run(ctx, req)
		cancel()
		view.term.Close()
		fyne.Do(func() {
			view.finished(res, err)
			w.notify(req, res, err)
			w.Reload()
			if res != nil && err == nil {
				view.onReview = func() {
					if info, ok := w.info(res.Meta.ID); ok {
						w.OpenReview(info)
					}
				}
			}
		})
	})
}

func (w *MainWindow) info(id string) (sandbox.Info, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, in := range w.infos {
		if in.ID == id {
			return in, true
		}
	}
	return sandbox.Info{}, false
}

// notify tells the desktop that a run ended.
func (w *MainWindow) notify(req RunRequest, res *pipeline.RunResult, err error) {
	project := filepath.Base(req.Project)
	var body string
	switch {
	case err != nil:
		body = fmt.Sprintf("The run on %s failed: %v", project, err)
	case res.Meta.Changes != nil && res.Meta.Changes.Files > 0:
		body = fmt.Sprintf("%s: %d %s changed, ready for review", project, res.Meta.Changes.Files, plural(res.Meta.Changes.Files, "file", "files"))
	default:
		body = fmt.Sprintf("%s: the agent changed nothing", project)
	}
	w.app.SendNotification(fyne.NewNotification("Airlock run finished", body))
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

// stepSpan is where each step sits on a run's progress bar.
var stepSpan = map[pipeline.Step][2]float64{
	pipeline.StepCreated: {0, 0.02}, pipeline.StepSnapshot: {0.02, 0.1}, pipeline.StepExcluded: {0.1, 0.1},
	pipeline.StepBoot: {0.1, 0.4}, pipeline.StepPush: {0.4, 0.55}, pipeline.StepRun: {0.55, 0.85},
	pipeline.StepCollect: {0.85, 0.97}, pipeline.StepStop: {0.97, 1}, pipeline.StepReady: {1, 1},
}

// progressOf is a run's bar: the step's place in the pipeline, advanced
// by its files done where it counts them. Runs of other processes show
// their status's step.
func progressOf(info sandbox.Info, run *runState) (float64, bool) {
	if !info.Status.Active() || !info.Live {
		return 0, false
	}
	var p pipeline.Progress
	if run != nil {
		p = run.progress
	} else {
		p.Step = map[sandbox.Status]pipeline.Step{
			sandbox.StatusCreated: pipeline.StepCreated, sandbox.StatusSnapshot: pipeline.StepSnapshot, sandbox.StatusBooting: pipeline.StepBoot,
			sandbox.StatusPushing: pipeline.StepPush, sandbox.StatusRunning: pipeline.StepRun, sandbox.StatusCollecting: pipeline.StepCollect,
		}[info.Status]
	}
	return stepFraction(p), true
}

func stepFraction(p pipeline.Progress) float64 {
	span, ok := stepSpan[p.Step]
	if !ok {
		return 0
	}
	f := span[0]
	if p.Total > 0 {
		f += (span[1] - span[0]) * float64(p.Done) / float64(p.Total)
	}
	return f
}
