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
	"github.com/airlock-dev/airlock/sync/manifest"
)

// RunView is one run, live: its progress, the agent's terminal (attached
// to the VM's PTY: type into it, resize it), elapsed time and Stop.
type RunView struct {
	Window  fyne.Window
	term    *terminal
	title   *fitLabel
	state   *fitLabel
	clock   *widget.Label
	bar     *widget.ProgressBar
	stopBtn *widget.Button
	review  *widget.Button
	// secrets names what was not copied because it looks like a secret.
	secrets *fitLabel
	started time.Time
	ended   bool
	// leftOut counts what the guest left out of the changes (files over
	// the size cap, special files…), for the line that ends the run.
	leftOut  int
	stop     func()
	onReview func()
}

// maxTitle is the most of a run's description its window title shows.
const maxTitle = 80

// NewRunView builds the window of a run (not shown).
func NewRunView(a fyne.App, req RunRequest) *RunView {
	v := &RunView{term: newTerminal(100, 30), started: time.Now()}
	what := runWhat(req)
	v.Window = a.NewWindow("Run: " + safetext.Line(filepath.Base(req.Project)) + "  ·  " + safetext.Cut(what, maxTitle))
	// Every text of the head is cut to the window's width, whole in a
	// tooltip: a long command line or progress message never sets the
	// window's minimum width.
	v.state = newFitLabel("starting…", fyne.TextStyle{})
	v.clock = widget.NewLabelWithStyle("0:00", fyne.TextAlignTrailing, fyne.TextStyle{Monospace: true})
	v.bar = widget.NewProgressBar()
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
	v.title = newFitLabel(projectName(req.Project)+"  ·  "+what, fyne.TextStyle{Bold: true})
	v.title.Tip = req.Project + "\n" + what
	v.secrets = newFitLabel("", fyne.TextStyle{})
	v.secrets.label.Importance = widget.WarningImportance
	v.secrets.Hide()
	head := container.NewBorder(nil, nil, nil, container.NewHBox(v.clock, v.stopBtn, v.review), v.title)
	v.Window.SetContent(withTips(container.NewBorder(container.NewVBox(head, v.state, v.bar, v.secrets), nil, nil, nil, v.term)))
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

// runWhat is what a run runs, for its window: the agent's name and the
// user's prompt (its first line), the script and the prompt, or the
// command line.
func runWhat(req RunRequest) string {
	who := req.AgentName
	if who == "" {
		who = req.Agent
	}
	switch {
	case who == "" && req.ScriptName != "":
		who = req.ScriptName
	case who == "":
		who = strings.Join(req.Command, " ")
		if len(req.Command) == 3 && req.Command[0] == "sh" && req.Command[1] == "-c" {
			who = req.Command[2] // a shell line, as typed
		}
	}
	who = safetext.Line(who)
	switch task := firstLine(req.Prompt); {
	case task != "":
		return who + ": " + task
	case req.Agent != "":
		return who + " (interactive)"
	}
	return who
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
	if p.Step == pipeline.StepExcluded {
		v.showSecrets(p.Excluded)
	}
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
		// The count first: a long message is cut at its end.
		msg = fmt.Sprintf("%d/%d  %s", p.Done, p.Total, msg)
	}
	v.setState(msg)
	v.bar.SetValue(stepFraction(p))
}

// setState shows where the run is, above the progress bar.
func (v *RunView) setState(s string) {
	v.state.SetText(s)
}

// showSecrets names what the snapshot left out as secrets, under the
// bar and in the terminal.
func (v *RunView) showSecrets(ex []manifest.Exclusion) {
	paths := manifest.SecretPaths(ex)
	note := secretsNote(paths)
	if note == "" {
		return
	}
	full := make([]string, len(paths))
	for i, p := range paths {
		full[i] = safetext.Line(p)
	}
	v.secrets.Tip = strings.Join(full, "\n")
	v.secrets.SetText(note)
	v.secrets.Show()
	fmt.Fprintf(v.term, "\x1b[1;33mairlock: %s\x1b[0m\r\n", note)
}

// finished shows how the run ended.
func (v *RunView) finished(res *pipeline.RunResult, err error) {
	v.ended = true
	v.stopBtn.Disable()
	v.Tick(time.Now())
	switch {
	case errors.Is(err, context.Canceled):
		v.setState("stopped; the sandbox is kept: its transcript is on its row in the main window")
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
