package gui

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/plan"
)

// RunDialog asks what to run on a project: an agent preset or a command,
// the prompt, the image and the limits.
type RunDialog struct {
	Project *widget.Label
	Preset  *widget.Select
	// SignIn says whether the chosen agent can sign in here.
	SignIn  *widget.Label
	Command *widget.Entry
	Prompt  *widget.Entry
	Image   *widget.Entry
	CPUs    *widget.Select
	Memory  *widget.Select
	Limit   *widget.Select
	Error   *widget.Label

	presets []Preset
	dialog  *dialog.CustomDialog
	start   func(RunRequest)
}

// The images the dialog picks: the stand-ins run on the minimal one, real
// agents need the full one (their CLIs, node, git, build tools).
const (
	MinimalImage = "minimal"
	FullImage    = "full"
)

// commandPrompt is the prompt's placeholder for a script or a command.
const commandPrompt = "What should the agent do? (given to it as $AIRLOCK_PROMPT)"

// Memory sizes and time limits offered, as shown. fromSettings, first
// and selected, takes the user's configured limit ([limits] of
// config.toml, narrowed by the project's airlock.toml), as airlock run
// does without a flag.
var (
	memoryChoices = []string{fromSettings, "512 MiB", "1024 MiB", "2048 MiB", "4096 MiB"}
	limitChoices  = []string{fromSettings, "none", "5m", "15m", "30m", "1h", "2h"}
)

const fromSettings = "as in settings"

// NewRunDialog builds the run dialog over parent for project; Start
// calls start with the request.
func NewRunDialog(parent fyne.Window, project string, presets []Preset, start func(RunRequest)) *RunDialog {
	d := &RunDialog{presets: presets, start: start}
	d.Project = widget.NewLabelWithStyle(project, fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
	d.Project.Truncation = fyne.TextTruncateEllipsis
	d.Command = widget.NewEntry()
	d.Command.SetPlaceHolder("e.g. make test, or sh -c '…'")
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.Name
		if p.SignIn != nil {
			if c, err := p.SignIn(); err == nil && !c.Ready {
				names[i] += " (not signed in)"
			}
		}
	}
	d.SignIn = widget.NewLabel("")
	d.SignIn.Wrapping = fyne.TextWrapWord
	d.Preset = widget.NewSelect(names, func(string) { d.presetChanged() })
	d.Prompt = widget.NewMultiLineEntry()
	d.Prompt.SetPlaceHolder(commandPrompt)
	d.Prompt.SetMinRowsVisible(3)
	d.Image = widget.NewEntry()
	d.Image.SetText(MinimalImage)
	cpus := []string{fromSettings}
	for i := 1; i <= runtime.NumCPU(); i++ {
		cpus = append(cpus, strconv.Itoa(i))
	}
	d.CPUs = widget.NewSelect(cpus, nil)
	d.CPUs.SetSelected(fromSettings)
	d.Memory = widget.NewSelect(memoryChoices, nil)
	d.Memory.SetSelected(fromSettings)
	d.Limit = widget.NewSelect(limitChoices, nil)
	d.Limit.SetSelected(fromSettings)
	d.Error = widget.NewLabel("")
	d.Error.Wrapping = fyne.TextWrapWord
	d.Error.Importance = widget.DangerImportance

	form := widget.NewForm(
		widget.NewFormItem("Project", d.Project),
		widget.NewFormItem("Agent", d.Preset),
		widget.NewFormItem("Sign-in", d.SignIn),
		widget.NewFormItem("Command", d.Command),
		widget.NewFormItem("Prompt", d.Prompt),
		widget.NewFormItem("Image", d.Image),
		widget.NewFormItem("CPUs", d.CPUs),
		widget.NewFormItem("Memory", d.Memory),
		widget.NewFormItem("Time limit", d.Limit),
	)
	note := widget.NewLabelWithStyle("The agent works on a copy of the project in a fresh VM; nothing reaches your folder until you approve it.",
		fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
	note.Wrapping = fyne.TextWrapWord
	startBtn := widget.NewButton("Start", d.Start)
	startBtn.Importance = widget.HighImportance
	// Scrolled: the sign-in help or an error may not fit a small window,
	// and the buttons must stay in view.
	d.dialog = dialog.NewCustomWithoutButtons("New run", container.NewVScroll(container.NewVBox(form, note, d.Error)), parent)
	d.dialog.SetButtons([]fyne.CanvasObject{widget.NewButton("Cancel", d.dialog.Hide), startBtn})
	d.dialog.Resize(fyne.NewSize(620, 520))
	if len(names) > 0 {
		d.Preset.SetSelectedIndex(0)
	}
	return d
}

func (d *RunDialog) Show() { d.dialog.Show() }

func (d *RunDialog) preset() (Preset, bool) {
	i := d.Preset.SelectedIndex()
	if i < 0 || i >= len(d.presets) {
		return Preset{}, false
	}
	return d.presets[i], true
}

func (d *RunDialog) presetChanged() {
	p, ok := d.preset()
	if !ok {
		return
	}
	switch {
	case p.Custom:
		// The previous preset's command is not the user's.
		d.Command.SetText("")
		d.Command.Enable()
	case p.Agent != "":
		d.Command.SetText(strings.Join(p.Template, " "))
		d.Command.Disable()
	default:
		d.Command.SetText(strings.Join(p.Command, " "))
		d.Command.Disable()
	}
	if p.Agent != "" {
		d.Prompt.SetPlaceHolder("What should the agent do? (empty: its interactive session)")
	} else {
		d.Prompt.SetPlaceHolder(commandPrompt)
	}
	// Real agents need the full image (their CLIs); the stand-ins run on
	// the minimal one.
	if p.Agent != "" && p.Agent != demoAgent {
		d.Image.SetText(FullImage)
	} else {
		d.Image.SetText(MinimalImage)
	}
	d.Error.SetText(p.Unavailable)
	d.signIn(p)
}

// signIn shows whether p's agent can sign in here, and returns why it
// cannot (a plan.CredentialError) or nil.
func (d *RunDialog) signIn(p Preset) (plan.Credentials, error) {
	if p.SignIn == nil {
		d.SignIn.SetText("")
		d.SignIn.Importance = widget.MediumImportance
		return plan.Credentials{}, nil
	}
	c, err := p.SignIn()
	if err != nil {
		d.SignIn.SetText(err.Error())
		d.SignIn.Importance = widget.DangerImportance
		d.SignIn.Refresh()
		return c, err
	}
	d.SignIn.SetText(strings.ToUpper(c.String()[:1]) + c.String()[1:])
	d.SignIn.Importance = widget.SuccessImportance
	if !c.Ready {
		// The window is small: what to set, in a few words (airlock run
		// and agents say where exactly).
		d.SignIn.SetText("Not signed in. " + c.Help())
		d.SignIn.Importance = widget.DangerImportance
		d.SignIn.Refresh()
		return c, fmt.Errorf("%s cannot sign in on this computer: set one of its credentials (see Sign-in), then Start again", c.Agent)
	}
	d.SignIn.Refresh()
	return c, nil
}

// Request is the run the dialog describes, or why it cannot start.
func (d *RunDialog) Request() (RunRequest, error) {
	req := RunRequest{Project: d.Project.Text, Prompt: strings.TrimSpace(d.Prompt.Text), Image: strings.TrimSpace(d.Image.Text)}
	p, ok := d.preset()
	switch {
	case !ok:
		return req, errors.New("choose an agent")
	case p.Unavailable != "":
		return req, errors.New(p.Unavailable)
	case p.Agent != "":
		// Looked up again: a key set since the dialog opened counts.
		if _, err := d.signIn(p); err != nil {
			return req, err
		}
		req.Agent = p.Agent
	case p.Script != "":
		script, err := os.ReadFile(p.Script)
		if err != nil {
			return req, fmt.Errorf("read the agent's script: %w", err)
		}
		req.Script, req.ScriptName = script, filepath.Base(p.Script)
	case p.Custom:
		args := strings.Fields(d.Command.Text)
		if len(args) == 0 {
			return req, errors.New("type the command to run in the project (it runs in /workspace, a copy)")
		}
		// One shell line, as typed: quoting and pipes work as in a terminal.
		req.Command = []string{"sh", "-c", strings.TrimSpace(d.Command.Text)}
	default:
		req.Command = append([]string(nil), p.Command...)
		if req.Prompt != "" {
			req.Command = append(req.Command, req.Prompt)
		}
	}
	req.CPUs, _ = strconv.Atoi(d.CPUs.Selected)
	mem, _, _ := strings.Cut(d.Memory.Selected, " ")
	req.MemoryMiB, _ = strconv.Atoi(mem)
	switch d.Limit.Selected {
	case "", fromSettings:
	case "none":
		req.Timeout = -1
	default:
		lim, err := time.ParseDuration(d.Limit.Selected)
		if err != nil {
			return req, fmt.Errorf("time limit: %w", err)
		}
		req.Timeout = lim
	}
	return req, nil
}

// Start starts the run the dialog describes, or shows why it cannot.
func (d *RunDialog) Start() {
	req, err := d.Request()
	if err != nil {
		d.Error.SetText(err.Error())
		return
	}
	d.dialog.Hide()
	d.start(req)
}
