package gui

import (
	"fmt"
	"net/url"
	"path/filepath"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// What a row of the main window opens: the review window (or the
// compare window of a fan-out), the run view, the project folder, the
// transcript; and discarding a sandbox.

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
