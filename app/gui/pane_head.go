package gui

import (
	"context"
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// headPane is the review window's header: a line saying what ran and
// where the sandbox stands (it follows the sandbox), then the verify
// result, what the changes mean, what deserves a second look, the
// secrets left out of the copy and how far the project moved on since
// the baseline.
type headPane struct {
	svc verifyLogs
	ev  headEvents
	// label shows info (as last read) with the agents named by presets.
	label   *fitLabel
	info    sandbox.Info
	presets []Preset
	stale   *widget.Label // the baseline is behind the project; nil when it is not
}

// verifyLogs is what the header reads: the verify command's output.
type verifyLogs interface {
	VerifyLog(id string) ([]byte, error)
}

// headEvents is what the header tells the window it is in.
type headEvents interface {
	// say shows a line on the status line.
	say(status string)
	// flaggedOnly lists only the flagged files.
	flaggedOnly()
}

// newHeadPane builds the header line of sandbox info.
func newHeadPane(svc verifyLogs, info sandbox.Info, ev headEvents) *headPane {
	p := &headPane{svc: svc, ev: ev, info: info}
	// A long command line ends at a word, whole in its tip.
	p.label = newFitLabel(p.text(), fyne.TextStyle{Bold: true})
	return p
}

// rows puts under top (the header line and what the window adds to it)
// the header's other rows for the changes cs: verify, overview, second
// look, secrets left out, and stale, the line about a baseline behind
// the project ("" for none).
func (p *headPane) rows(top fyne.CanvasObject, cs *review.Changeset, stale string) fyne.CanvasObject {
	top = container.NewVBox(top, p.verifyRow(p.info))
	if o := overviewRow(cs); o != nil {
		top = container.NewVBox(top, o)
	}
	if look := p.secondLookRow(cs); look != nil {
		top = container.NewVBox(top, look)
	}
	if note := excludedNote(p.info); note != "" {
		// What the agent never saw may explain what it did.
		secrets := newFitLabel(note, fyne.TextStyle{Italic: true})
		top = container.NewVBox(top, container.NewBorder(nil, nil, widget.NewIcon(theme.VisibilityOffIcon()), nil, secrets))
	}
	if stale != "" {
		p.stale = widget.NewLabelWithStyle(stale, fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
		p.stale.Importance = widget.WarningImportance
		p.stale.Wrapping = fyne.TextWrapWord
		top = container.NewVBox(top, container.NewBorder(nil, nil, widget.NewIcon(theme.WarningIcon()), nil, p.stale))
	}
	return top
}

// setInfo shows the sandbox as read again.
func (p *headPane) setInfo(info sandbox.Info) {
	p.info = info
	p.label.SetText(p.text())
}

// setPresets names agents as the run dialog does.
func (p *headPane) setPresets(presets []Preset) {
	p.presets = presets
	p.label.SetText(p.text())
}

// text is the header line: project, what ran (the agent by its name, and
// the user's prompt), state and verify.
func (p *headPane) text() string {
	info := p.info
	s := fmt.Sprintf("%s  ·  %s  ·  %s", shortPath(info.Project), runTitle(info.Meta, p.presets), statusText(info))
	if stage, _ := stageText(info); stage != "" {
		s += "  ·  " + stage
	}
	if info.Verify != nil {
		s += "  ·  verify " + info.Verify.String()
	}
	return s
}

// staleNote is the review window's line about a baseline the project has
// moved on from ("" when it has not), and the paths the user changed
// since (their rows are marked). The review goes on when the project
// cannot be compared (moved away, unreadable): the line says so.
func staleNote(svc ReviewService, id string) (string, map[string]bool) {
	st, err := svc.Staleness(context.Background(), id)
	if err != nil {
		return "Cannot compare the project with the baseline: " + err.Error(), nil
	}
	if st.Behind() == 0 {
		return "", nil
	}
	changed := make(map[string]bool, len(st.Paths))
	for _, p := range st.Paths {
		changed[p] = true
	}
	s := st.String()
	note := strings.ToUpper(s[:1]) + s[1:] + ". Applying merges the agent's changes into your edits three ways; if a file conflicts, nothing is written until you choose for it."
	if len(st.Paths) > 0 {
		note += " Files you changed are marked in the list."
	}
	return note, changed
}

// verifyRow is the review's first word on the changes: whether the tests
// (the sandbox's verify) passed in the sandbox, failed or never ran, with
// its output a click away.
func (p *headPane) verifyRow(info sandbox.Info) fyne.CanvasObject {
	text, ok := info.VerifyGate()
	text = strings.ToUpper(text[:1]) + text[1:]
	label := newFitLabel(safetext.Line(text), fyne.TextStyle{Bold: ok})
	icon := widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))
	label.label.Importance = widget.WarningImportance
	if ok {
		icon = widget.NewIcon(theme.NewSuccessThemedResource(theme.ConfirmIcon()))
		label.label.Importance = widget.SuccessImportance
	}
	var right fyne.CanvasObject
	if info.Verify != nil {
		show := widget.NewButton("Show its output", func() { p.showVerifyLog(info) })
		show.Importance = widget.LowImportance
		right = show
	}
	return container.NewBorder(nil, nil, icon, right, label)
}

// showVerifyLog opens a window with what the verify command printed.
func (p *headPane) showVerifyLog(info sandbox.Info) {
	b, err := p.svc.VerifyLog(info.ID)
	if err != nil {
		p.ev.say("Cannot read the verify output: " + err.Error())
		return
	}
	if b == nil {
		b = []byte("(the verify command printed nothing)")
	}
	win := fyne.CurrentApp().NewWindow("Verify of " + info.ID + ": " + safetext.Line(info.Verify.Command))
	text := widget.NewLabelWithStyle(plainTranscript(b), fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
	win.SetContent(container.NewBorder(newFitLabel(safetext.Line(info.Verify.Command+": "+info.Verify.String()), fyne.TextStyle{Bold: true}), nil, nil, nil, wheelScroll(container.NewScroll(text))))
	win.Resize(fyne.NewSize(900, 600))
	win.Show()
}

// overviewRow says what the run changed in meaning (the functions, types
// and tests added, removed, renamed or changed: review's Overview) in one
// fitted line, a phrase a line in its tooltip; nil for no change.
func overviewRow(cs *review.Changeset) fyne.CanvasObject {
	o := cs.Overview() // names shown safely already
	if o == "" {
		return nil
	}
	label := newFitLabel("What changed: "+o, fyne.TextStyle{})
	label.Tip = "What changed:\n" + strings.ReplaceAll(o, "; ", "\n") +
		"\n\nEach file's own list is above its diff."
	return container.NewBorder(nil, nil, widget.NewIcon(theme.InfoIcon()), nil, label)
}

// secondLookText is the changeset's flags in one line ("5 files deserve
// a second look: 2 dependency changes (added: left-pad), 1 test
// skipped"), and the whole of it a line per kind for the tooltip; "" when
// no file is flagged. Dependency names come from the guest's files.
func secondLookText(cs *review.Changeset) (line, tip string) {
	look := cs.SecondLook()
	if look.Files == 0 {
		return "", ""
	}
	head := fmt.Sprintf("%d %s a second look", look.Files, plural(look.Files, "file deserves", "files deserve"))
	var kinds []string
	for _, k := range look.Kinds {
		kinds = append(kinds, safetext.Line(k.Text))
	}
	line = head + ": " + strings.Join(kinds, ", ")
	tip = head + ":\n" + strings.Join(kinds, "\n") + "\n\nTick Flagged beside the filter to list only them; each one's warning sign says why."
	return line, tip
}

// secondLookRow is the overview of what deserves a second look, under
// the verify line (nil when no file is flagged): one fitted line, whole
// in its tooltip, and a button that lists only the flagged files.
func (p *headPane) secondLookRow(cs *review.Changeset) fyne.CanvasObject {
	line, tip := secondLookText(cs)
	if line == "" {
		return nil
	}
	label := newFitLabel(line, fyne.TextStyle{})
	label.Tip = tip
	label.label.Importance = widget.WarningImportance
	icon := widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))
	show := widget.NewButton("Show only these", p.ev.flaggedOnly)
	show.Importance = widget.LowImportance
	return container.NewBorder(nil, nil, icon, show, label)
}
