package gui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// MainWindow lists the sandboxes and starts runs: drop a project folder
// on it, or use New run….
type MainWindow struct {
	Window  fyne.Window
	app     fyne.App
	svc     Service
	presets []Preset
	now     func() time.Time

	mu    sync.Mutex
	infos []sandbox.Info
	runs  map[string]*runState // runs started by this window, by sandbox ID

	table   *widget.Table
	message *widget.Label
	// dialog is the open run dialog, if any.
	dialog *RunDialog
	// reviews are the open review windows, by sandbox ID.
	reviews map[string]*ReviewWindow
	// async runs slow work (a run) off fyne's goroutine; tests make it
	// synchronous.
	async func(func())
}

// goAsync runs f on a new goroutine.
func goAsync(f func()) { go f() }

// runState is what the main window knows of a run it started.
type runState struct {
	progress pipeline.Progress
	view     *RunView
}

// Column titles of the sandbox table.
var columns = []string{"Sandbox", "Project", "Agent or command", "State", "Elapsed", "Changes", "Progress"}

var columnWidths = []float32{92, 200, 170, 280, 70, 110, 130}

// NewMainWindow builds the main window (not shown) and loads the list.
func NewMainWindow(a fyne.App, svc Service, presets []Preset) *MainWindow {
	w := &MainWindow{
		Window: a.NewWindow("Airlock"), app: a, svc: svc, presets: presets, now: time.Now,
		runs: map[string]*runState{}, reviews: map[string]*ReviewWindow{}, async: goAsync,
	}
	w.build()
	w.Window.SetOnDropped(func(_ fyne.Position, uris []fyne.URI) {
		paths := make([]string, 0, len(uris))
		for _, u := range uris {
			paths = append(paths, u.Path())
		}
		w.Drop(paths)
	})
	w.Window.Resize(fyne.NewSize(1100, 520))
	w.Reload()
	return w
}

func (w *MainWindow) build() {
	w.table = widget.NewTableWithHeaders(
		func() (int, int) {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.infos), len(columns)
		},
		func() fyne.CanvasObject {
			bar := widget.NewProgressBar()
			bar.Hide()
			l := widget.NewLabel("")
			l.Truncation = fyne.TextTruncateEllipsis
			return container.NewStack(l, bar)
		},
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
		w.table.SetColumnWidth(i, cw)
	}
	w.table.OnSelected = func(id widget.TableCellID) {
		w.table.UnselectAll()
		w.open(id.Row)
	}
	newRun := widget.NewButtonWithIcon("New run…", theme.ContentAddIcon(), func() {
		dialog.ShowFolderOpen(func(dir fyne.ListableURI, err error) {
			if err != nil {
				w.showMessage(err.Error())
				return
			}
			if dir != nil {
				w.Drop([]string{dir.Path()})
			}
		}, w.Window)
	})
	newRun.Importance = widget.HighImportance
	refresh := widget.NewButtonWithIcon("", theme.ViewRefreshIcon(), w.Reload)
	w.message = widget.NewLabel("")
	w.message.Wrapping = fyne.TextWrapWord
	hint := widget.NewLabelWithStyle("Drop a project folder on this window to run an agent on a copy of it in a throwaway VM. Select a sandbox to review or watch it.",
		fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
	hint.Wrapping = fyne.TextWrapWord
	top := container.NewBorder(nil, nil, nil, container.NewHBox(refresh, newRun), hint)
	w.Window.SetContent(container.NewBorder(top, w.message, nil, nil, w.table))
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

func (w *MainWindow) showMessage(s string) { w.message.SetText(safetext.Text(s)) } // errors may quote guest paths

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
	stack := o.(*fyne.Container)
	label, bar := stack.Objects[0].(*widget.Label), stack.Objects[1].(*widget.ProgressBar)
	info, run, ok := w.row(id.Row)
	if !ok {
		return
	}
	label.Show()
	bar.Hide()
	label.TextStyle = fyne.TextStyle{Monospace: id.Col == 0}
	switch id.Col {
	case 0:
		label.SetText(info.ID)
	case 1:
		label.SetText(projectName(info.Project))
	case 2:
		label.SetText(commandOf(info.Meta))
	case 3:
		st := statusText(info)
		if run != nil && info.Status.Active() && run.progress.Message != "" {
			st = safetext.Line(run.progress.Message)
		}
		label.SetText(st)
	case 4:
		label.SetText(elapsed(info, w.now()))
	case 5:
		label.SetText(changesText(info))
	case 6:
		frac, show := progressOf(info, run)
		if show {
			label.Hide()
			bar.SetValue(frac)
			bar.Show()
		} else {
			label.SetText("")
		}
	}
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
			r.Window.Close()
			delete(w.reviews, r.id)
			if nr := w.OpenReview(info); nr != nil && nr.view != nil {
				nr.view.SetSelectedIndex(1)
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
	w.dialog = NewRunDialog(w.Window, paths[0], w.presets, w.start)
	w.dialog.Show()
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
	return string(info.Status)
}

func commandOf(m sandbox.Meta) string {
	if m.ScriptName == "demo-agent.sh" {
		return "Demo agent"
	}
	return m.CommandLine()
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
