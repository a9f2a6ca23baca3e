package gui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"fyne.io/fyne/v2"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// Runs the main window starts: from the run dialog or Try the demo, each
// in a run view, its progress on the list and a notification when it
// ends.

// goAsync runs f on a new goroutine.
func goAsync(f func()) { go f() }

// runState is what the main window knows of a run it started.
type runState struct {
	progress pipeline.Progress
	view     *RunView
}

// demoPrompt is the task Try the demo gives the demo agent.
const demoPrompt = "Plan stop words for the counter"

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
