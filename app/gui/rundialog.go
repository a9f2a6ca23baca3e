package gui

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/vm/image"
)

// RunDialog asks what to run on a project: an agent preset or a command,
// the prompt, the image and the limits.
type RunDialog struct {
	// Project shows the project's path, ~ for the home folder as the
	// main window does; project is the path itself.
	Project *widget.Label
	project string
	Preset  *widget.Select
	// SignIn says whether the chosen agent can sign in here.
	SignIn  *widget.Label
	Command *widget.Entry
	Prompt  *widget.Entry
	// Image offers the images built here (and full and minimal, built
	// or not: Start says how to build one), and the project's own
	// environment when it has one.
	Image  *widget.Select
	CPUs   *widget.Select
	Memory *widget.Select
	Limit  *widget.Select
	Error  *widget.Label

	presets []Preset
	setup   RunSetup
	// images are the names behind Image's options ("" the project's
	// environment).
	images []string
	// check says why an image cannot boot, or nil.
	check  func(string) error
	dialog *dialog.CustomDialog
	start  func(RunRequest)
}

// RunDialogOptions is what the run dialog starts from besides the
// presets.
type RunDialogOptions struct {
	// Setup is what a run on the project gets without choosing, and the
	// images built here.
	Setup RunSetup
	// CheckImage, if set, says why an image cannot boot here; Start
	// shows it and keeps the dialog open.
	CheckImage func(name string) error
	// Last are the choices of the last run started, selected again.
	Last Prefs
}

// The images the dialog picks: the stand-ins run on the minimal one, real
// agents need the full one (their CLIs, node, git, build tools).
const (
	MinimalImage = "minimal"
	FullImage    = "full"
)

// commandPrompt is the prompt's placeholder for a script or a command.
const commandPrompt = "What should the agent do? (given to it as $AIRLOCK_PROMPT)"

// Memory sizes and time limits offered, after the first choice, which
// takes the user's configured limit ([limits] of config.toml, narrowed by
// the project's airlock.toml) as airlock run does without a flag, and
// shows it.
var (
	memoryChoices = []string{"512 MiB", "1024 MiB", "2048 MiB", "4096 MiB", "8192 MiB"}
	limitChoices  = []string{"none", "5m", "15m", "30m", "1h", "2h"}
)

const fromSettings = "as in settings"

// environmentChoice is the Image option of the project's own environment.
const environmentChoice = "the project's environment (airlock.toml)"

// NewRunDialog builds the run dialog over parent for project; Start
// calls start with the request.
func NewRunDialog(parent fyne.Window, project string, presets []Preset, o RunDialogOptions, start func(RunRequest)) *RunDialog {
	d := &RunDialog{presets: presets, start: start, setup: o.Setup, check: o.CheckImage, project: project}
	lim := o.Setup.Limits
	d.Project = widget.NewLabelWithStyle(shortPath(project), fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
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
	d.Prompt.Wrapping = fyne.TextWrapWord
	d.Image = widget.NewSelect(d.imageChoices(), nil)
	cpus := []string{settingsChoice(fmt.Sprintf("%d %s", lim.CPUs, plural(lim.CPUs, "CPU", "CPUs")), lim.CPUs > 0)}
	for i := 1; i <= runtime.NumCPU(); i++ {
		cpus = append(cpus, strconv.Itoa(i))
	}
	d.CPUs = widget.NewSelect(cpus, nil)
	d.Memory = widget.NewSelect(append([]string{settingsChoice(memoryText(lim.Memory), lim.Memory != 0)}, memoryChoices...), nil)
	d.Limit = widget.NewSelect(append([]string{settingsChoice(timeoutText(lim.Timeout), lim.Timeout != 0)}, limitChoices...), nil)
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
	d.dialog.Resize(fyne.NewSize(640, 600))
	d.CPUs.SetSelectedIndex(0)
	d.Memory.SetSelectedIndex(0)
	d.Limit.SetSelectedIndex(0)
	if len(names) > 0 {
		d.Preset.SetSelectedIndex(0)
	}
	d.restore(o.Last)
	return d
}

// settingsChoice is the first choice of a limit: the configured one,
// shown when known.
func settingsChoice(value string, known bool) string {
	if !known {
		return fromSettings
	}
	return fromSettings + " (" + value + ")"
}

func memoryText(s config.Size) string {
	if s == config.Unlimited {
		return "no limit"
	}
	return fmt.Sprintf("%d MiB", s.MiB())
}

func timeoutText(d config.Duration) string {
	if d == config.Unlimited {
		return "none"
	}
	return shortDuration(time.Duration(d))
}

// shortDuration is 1h, 15m, 90s: the largest unit that divides d.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// imageChoices are the Image options (and d.images the names behind
// them): the project's environment if it has one, full and minimal, then
// the other images built here; one not built says so.
func (d *RunDialog) imageChoices() []string {
	var opts []string
	d.images = nil
	if d.setup.Environment {
		opts, d.images = append(opts, environmentChoice), append(d.images, "")
	}
	names := []string{FullImage, MinimalImage}
	for _, n := range d.setup.Images {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		label := n
		switch n {
		case FullImage:
			label += " (agent CLIs, node, git, build tools)"
		case MinimalImage:
			label += " (small, for scripts and the demo agent)"
		}
		if !slices.Contains(d.setup.Images, n) {
			label += " — not built"
		}
		opts, d.images = append(opts, label), append(d.images, n)
	}
	return opts
}

// selectImage selects image name ("" the project's environment).
func (d *RunDialog) selectImage(name string) bool {
	if i := slices.Index(d.images, name); i >= 0 {
		d.Image.SetSelectedIndex(i)
		return true
	}
	return false
}

// ImageName is the image chosen ("" the project's environment).
func (d *RunDialog) ImageName() string {
	i := d.Image.SelectedIndex()
	if i < 0 || i >= len(d.images) {
		return ""
	}
	return d.images[i]
}

// restore selects the last run's choices where they are still offered.
func (d *RunDialog) restore(last Prefs) {
	if last.Agent != "" {
		if i := slices.IndexFunc(d.presets, func(p Preset) bool { return p.Name == last.Agent }); i >= 0 {
			d.Preset.SetSelectedIndex(i)
		}
	}
	if last.Image != "" {
		d.selectImage(last.Image)
	}
	if last.CPUs > 0 && slices.Contains(d.CPUs.Options, strconv.Itoa(last.CPUs)) {
		d.CPUs.SetSelected(strconv.Itoa(last.CPUs))
	}
	if m := fmt.Sprintf("%d MiB", last.MemoryMiB); last.MemoryMiB > 0 && slices.Contains(d.Memory.Options, m) {
		d.Memory.SetSelected(m)
	}
	if last.Timeout != "" && slices.Contains(d.Limit.Options, last.Timeout) {
		d.Limit.SetSelected(last.Timeout)
	}
}

// Choices are the dialog's choices to remember for the next run.
func (d *RunDialog) Choices() Prefs {
	var c Prefs
	if p, ok := d.preset(); ok {
		c.Agent = p.Name
	}
	c.Image = d.ImageName()
	if d.CPUs.SelectedIndex() > 0 {
		c.CPUs, _ = strconv.Atoi(d.CPUs.Selected)
	}
	if d.Memory.SelectedIndex() > 0 {
		mem, _, _ := strings.Cut(d.Memory.Selected, " ")
		c.MemoryMiB, _ = strconv.Atoi(mem)
	}
	if d.Limit.SelectedIndex() > 0 {
		c.Timeout = d.Limit.Selected
	}
	return c
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
	// The project's own environment, when it has one, is what airlock
	// run picks without --image.
	switch {
	case d.setup.Environment:
		d.selectImage("")
	case p.Agent != "" && p.Agent != demoAgent:
		d.selectImage(FullImage)
	default:
		d.selectImage(MinimalImage)
	}
	d.Error.SetText(p.Unavailable)
	d.signIn(p)
}

// signIn shows whether p's agent can sign in here, and returns why it
// cannot (a plan.CredentialError) or nil.
func (d *RunDialog) signIn(p Preset) (plan.Credentials, error) {
	if p.SignIn == nil {
		// The demo agent, a script or a command: nothing to sign in to.
		d.SignIn.SetText("None needed")
		d.SignIn.Importance = widget.MediumImportance
		d.SignIn.Refresh()
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
	req := RunRequest{Project: d.project, Prompt: strings.TrimSpace(d.Prompt.Text), Image: d.ImageName()}
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
	if req.Image != "" && d.check != nil {
		// Checked now, while the dialog is open: after it closes the
		// user would have to start over.
		if err := d.check(req.Image); err != nil {
			return req, imageError(req.Image, err)
		}
	}
	c := d.Choices()
	req.CPUs, req.MemoryMiB = c.CPUs, c.MemoryMiB
	switch c.Timeout {
	case "":
	case "none":
		req.Timeout = -1
	default:
		lim, err := time.ParseDuration(c.Timeout)
		if err != nil {
			return req, fmt.Errorf("time limit: %w", err)
		}
		req.Timeout = lim
	}
	return req, nil
}

// imageError says that image cannot boot here and how to build it.
func imageError(name string, err error) error {
	if errors.Is(err, image.ErrNotFound) {
		// Shown as it is in the dialog: a sentence.
		return fmt.Errorf("The %s image is not built on this computer: run `airlock image build %s` in a terminal (it takes a few minutes), or choose another image, then Start again", name, name)
	}
	return fmt.Errorf("The %s image cannot be used: %w", name, err)
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
