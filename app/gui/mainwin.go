package gui

import (
	"context"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// MainWindow lists the sandboxes and starts runs: drop a project folder
// on it, type or browse to one, or try the demo. This file builds it and
// keeps its list current; the list is mainwin_list.go, the drop target
// mainwin_drop.go, runs mainwin_runs.go, what a row opens
// mainwin_open.go.
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
	w.Window.SetOnDropped(w.dropped)
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

// build lays the window out: the toolbar above, the list (or, with no
// sandbox yet, the empty drop zone), the message line under it.
func (w *MainWindow) build() {
	w.table = w.newTable()
	top := w.newToolbar()

	w.message = widget.NewLabel("")
	w.message.Wrapping = fyne.TextWrapWord
	w.message.Hide()

	w.empty = w.newEmptyZone()
	w.list = container.NewBorder(newSlimDropZone(), nil, nil, nil, container.New(fittedTable{w}, w.table))
	w.list.Hide()

	w.Window.SetContent(withTips(container.NewBorder(top, w.message, nil, nil, container.NewStack(w.empty, w.list))))
}

// newToolbar is the row above the list: the project folder (typed, or a
// recent one), Browse…, New run…, Try the demo and a reload.
func (w *MainWindow) newToolbar() fyne.CanvasObject {
	w.Folder = widget.NewSelectEntry(nil)
	w.Folder.SetPlaceHolder("Project folder: type its path, Browse…, or drop it on the window")
	w.Folder.OnSubmitted = func(string) { w.RunFolder() }
	browse := widget.NewButtonWithIcon("Browse…", theme.FolderOpenIcon(), w.browse)
	newRun := widget.NewButtonWithIcon("New run…", theme.ContentAddIcon(), w.RunFolder)
	newRun.Importance = widget.HighImportance
	w.TryDemo = widget.NewButtonWithIcon("Try the demo", theme.MediaPlayIcon(), w.StartDemo)
	refresh := newTipButton("", theme.ViewRefreshIcon(), "Read the sandbox list again", w.Reload)
	return container.NewBorder(nil, nil, nil, container.NewHBox(browse, newRun, widget.NewSeparator(), w.TryDemo, refresh), w.Folder)
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
