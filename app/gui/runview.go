package gui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// RunView is one run, live: its progress, the agent's terminal (attached
// to the VM's PTY: type into it, resize it), elapsed time and Stop.
type RunView struct {
	Window  fyne.Window
	term    *terminal
	state   *widget.Label
	clock   *widget.Label
	bar     *widget.ProgressBar
	stopBtn *widget.Button
	review  *widget.Button
	started time.Time
	ended   bool
	// leftOut counts what the guest left out of the changes (files over
	// the size cap, special files…), for the line that ends the run.
	leftOut  int
	stop     func()
	onReview func()
}

// NewRunView builds the window of a run (not shown).
func NewRunView(a fyne.App, req RunRequest) *RunView {
	v := &RunView{term: newTerminal(100, 30), started: time.Now()}
	what := runWhat(req)
	v.Window = a.NewWindow("Run: " + filepath.Base(req.Project) + "  ·  " + what)
	v.state = widget.NewLabel("starting…")
	v.state.Truncation = fyne.TextTruncateEllipsis
	v.clock = widget.NewLabelWithStyle("0:00", fyne.TextAlignTrailing, fyne.TextStyle{Monospace: true})
	v.bar = widget.NewProgressBar()
	v.bar.TextFormatter = func() string { return v.state.Text }
	v.stopBtn = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), func() {
		if v.stop != nil {
			v.setState("stopping…")
			v.stop()
		}
	})
	v.stopBtn.Importance = widget.DangerImportance
	v.review = widget.NewButtonWithIcon("Review changes", theme.VisibilityIcon(), func() {
		if v.onReview != nil {
			v.onReview()
		}
	})
	v.review.Disable()
	title := widget.NewLabelWithStyle(projectName(req.Project)+"  ·  "+what, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	title.Truncation = fyne.TextTruncateEllipsis
	head := container.NewBorder(nil, nil, nil, container.NewHBox(v.clock, v.stopBtn, v.review), title)
	v.Window.SetContent(container.NewBorder(container.NewVBox(head, v.bar), nil, nil, nil, v.term))
	v.Window.Resize(fyne.NewSize(900, 600))
	v.Window.Canvas().Focus(v.term)
	// Closing the window of a run that goes on only hides it: the main
	// window's row shows it again.
	v.Window.SetCloseIntercept(func() {
		if v.ended {
			v.Window.Close()
			return
		}
		v.Window.Hide()
	})
	return v
}

// runWhat is what a run runs, for its window: the agent and the user's
// prompt (its first line), the script, or the command line.
func runWhat(req RunRequest) string {
	switch {
	case req.Agent != "" && strings.TrimSpace(req.Prompt) != "":
		first, _, _ := strings.Cut(strings.TrimSpace(req.Prompt), "\n")
		return req.Agent + ": " + first
	case req.Agent != "":
		return req.Agent + " (interactive)"
	case req.ScriptName != "":
		return "sh " + req.ScriptName
	}
	return strings.Join(req.Command, " ")
}

// Terminal is the run's terminal widget (a fyne.Focusable), for tests.
func (v *RunView) Terminal() fyne.Focusable { return v.term }

// Tick updates the elapsed time (on fyne's goroutine).
func (v *RunView) Tick(now time.Time) {
	if !v.ended {
		v.clock.SetText(formatDuration(now.Sub(v.started)))
	}
}

func (v *RunView) progress(p pipeline.Progress) {
	msg := safetext.Line(p.Message) // it may name the guest's paths
	if p.Step == pipeline.StepCollect && len(p.Excluded) > 0 {
		// What was left out of the changes stays in the terminal, where
		// the next progress does not replace it.
		v.leftOut = len(p.Excluded)
		fmt.Fprintf(v.term, "\r\n\x1b[1;33mairlock: %s\x1b[0m\r\n", msg)
	}
	if msg == "" {
		msg = string(p.Step)
	}
	if p.Total > 0 {
		msg = fmt.Sprintf("%s %d/%d", msg, p.Done, p.Total)
	}
	v.setState(msg)
	v.bar.SetValue(stepFraction(p))
}

// setState shows where the run is, in the progress bar.
func (v *RunView) setState(s string) {
	v.state.SetText(s)
	v.bar.Refresh()
}

// finished shows how the run ended.
func (v *RunView) finished(res *pipeline.RunResult, err error) {
	v.ended = true
	v.stopBtn.Disable()
	v.Tick(time.Now())
	switch {
	case errors.Is(err, context.Canceled):
		v.setState("stopped; the sandbox is kept, marked failed")
	case err != nil:
		v.setState("failed (the reason is in the terminal)")
		// The terminal has room for the whole reason.
		fmt.Fprintf(v.term, "\r\n\x1b[1;31mairlock: %s\x1b[0m\r\n", strings.ReplaceAll(err.Error(), "\n", "\r\n"))
	default:
		v.bar.SetValue(1)
		msg := fmt.Sprintf("%s (exit %d)", res.Meta.Status, res.ExitCode)
		if c := res.Meta.Changes; c != nil {
			msg += fmt.Sprintf(": %d %s changed", c.Files, plural(c.Files, "file", "files"))
			if c.Files > 0 {
				v.review.Enable()
				v.review.Importance = widget.HighImportance
				v.review.Refresh()
			}
		}
		if v.leftOut > 0 {
			msg += fmt.Sprintf("; %d left out (named in the terminal)", v.leftOut)
		}
		v.setState(msg)
	}
}
