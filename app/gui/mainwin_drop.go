package gui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// The main window's drop target: the drop zones, a folder dropped,
// browsed to or typed, and why one cannot be run on.

// newEmptyZone is what the window shows while there is no sandbox yet:
// a large drop zone that says what Airlock does, and the demo, which
// needs nothing set up.
func (w *MainWindow) newEmptyZone() *fyne.Container {
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
	return container.NewPadded(newDropZone(container.NewCenter(container.NewGridWrap(fyne.NewSize(620, emptyBody.MinSize().Height), emptyBody))))
}

// newSlimDropZone is the drop zone above the list.
func newSlimDropZone() fyne.CanvasObject {
	slimText := widget.NewLabel("Drop a project folder here to run an agent on a copy of it. Select a sandbox to review or watch it.")
	slimText.Truncation = fyne.TextTruncateEllipsis
	return newDropZone(container.NewBorder(nil, nil, widget.NewIcon(theme.FolderOpenIcon()), nil, slimText))
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

// dropped passes what was dropped on the window to Drop, as paths.
func (w *MainWindow) dropped(_ fyne.Position, uris []fyne.URI) {
	paths := make([]string, 0, len(uris))
	for _, u := range uris {
		paths = append(paths, u.Path())
	}
	w.Drop(paths)
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
