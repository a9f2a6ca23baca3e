package gui

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/heldreq"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// The review window's staged actions: the requests the agent made that
// a [[network.stage]] entry held, listed after the files under
// "Actions (N)", each shown in the diff pane's place when selected and
// approved or rejected like a file. Everything in an action is the
// guest's: every string goes through safetext, is cut, and never sets
// the window's width.

// actionsGroup is the file list's row heading the actions; an action's
// row is actionRowID of its number. Neither is a path.
const (
	actionsGroup    = "\x00actions"
	actionRowPrefix = "\x00action "
)

func actionRowID(id int) string { return actionRowPrefix + strconv.Itoa(id) }

// How much of an action the window shows: the body pretty-printed, a
// line (a path, a header), the sentence.
const (
	actionBodyMax     = 64 << 10
	actionLineMax     = 1000
	actionSentenceMax = 240
)

// actionsPane is the review window's staged actions: the requests the
// agent made that a [[network.stage]] entry held, each shown in the
// diff's place when the cursor is on it (the file list lists them after
// the files), approved or rejected like a file, and sent by Apply once
// the user agrees (pane_actions_send.go).
type actionsPane struct {
	svc ActionService
	id  string
	// m is the review shown (a round's own view has no action); full is
	// the whole review, whose approved actions are sent.
	m, full  *reviewModel
	readOnly bool
	place    actionPlace
	win      fyne.Window
	async    func(func())
	ev       actionsEvents
}

// actionPlace is where an action is shown: the diff pane's place, its
// header pinned above the scrolling rest.
type actionPlace interface {
	showInstead(head fyne.CanvasObject, body []fyne.CanvasObject, scroll bool)
}

// actionsEvents is what the staged actions tell the window they are in.
type actionsEvents interface {
	// say shows a line on the status line.
	say(status string)
	// refresh saves the decisions after a verdict and redraws them.
	refresh()
	// showFile shows what the cursor is on in the diff's place.
	showFile()
	// selectAction selects action id's row in the file list and shows
	// it; selectCurrent the cursor's file.
	selectAction(id int)
	selectCurrent()
	// actionsReloaded follows the actions read again: the list and the
	// diff's place show them as they stand.
	actionsReloaded()
	// reviewChanged tells whoever follows the sandbox that it changed.
	reviewChanged()
}

// newActionsPane is the staged actions of sandbox id in the review full;
// its dialogs open on win, async sends off fyne's goroutine.
func newActionsPane(svc ActionService, id string, full *reviewModel, place actionPlace, win fyne.Window, async func(func()), ev actionsEvents) *actionsPane {
	return &actionsPane{svc: svc, id: id, m: full, full: full, place: place, win: win, async: async, ev: ev}
}

// setModel shows the review m (a round's own view has no action), read
// only or not.
func (p *actionsPane) setModel(m *reviewModel, readOnly bool) { p.m, p.readOnly = m, readOnly }

// setVerdict approves or rejects action id, saved with the files'
// verdicts; one whose sending started cannot be decided again.
func (p *actionsPane) setVerdict(id int, approve bool) {
	if p.readOnly {
		return
	}
	if !p.m.setAction(id, approve) {
		if v := p.m.actionView(id); v != nil {
			p.ev.say(fmt.Sprintf("Action %d is %s: a verdict changes nothing now.", id, actionState(*v)))
		}
		return
	}
	p.ev.refresh()
	p.ev.showFile()
}

// key handles a review key while an action is shown: a / A
// approve it, r / R reject it, n / j the next action, p / k the one
// before (from the first, back to the last file). It reports whether ch
// is one of them.
func (p *actionsPane) key(ch rune) bool {
	vs := p.m.actionViews()
	i := slices.IndexFunc(vs, func(v sandbox.ActionView) bool { return v.ID == p.m.action })
	if i < 0 {
		return false
	}
	switch ch {
	case 'a', 'A', 'r', 'R':
		p.setVerdict(p.m.action, ch == 'a' || ch == 'A')
	case 'n', 'j':
		if i+1 < len(vs) {
			p.ev.selectAction(vs[i+1].ID)
		}
	case 'p', 'k':
		if i > 0 {
			p.ev.selectAction(vs[i-1].ID)
			return true
		}
		if len(p.m.files) == 0 {
			return true
		}
		// Back to the last file, at its last hunk for k.
		p.m.action = 0
		p.m.file, p.m.hunk = len(p.m.files)-1, 0
		if f := p.m.current(); ch == 'k' && len(f.Hunks) > 0 {
			p.m.hunk = len(f.Hunks) - 1
		}
		p.ev.selectCurrent()
	default:
		return false
	}
	return true
}

// enter goes on from the last file to the first action: n on
// the last file, j on its last hunk. It reports whether it did.
func (p *actionsPane) enter(ch rune) bool {
	if len(p.m.actions) == 0 || (ch != 'n' && ch != 'j') {
		return false
	}
	f := p.m.current()
	if len(p.m.files) > 0 && p.m.file < len(p.m.files)-1 {
		return false
	}
	if ch == 'j' && f != nil && p.m.hunk < len(f.Hunks)-1 {
		return false
	}
	p.ev.selectAction(p.m.actions[0].ID)
	return true
}

// render draws the action under the cursor in the diff's place: its
// sentence and verdict above, what would be sent below. It reports
// whether it did: false when the cursor is on a file.
func (p *actionsPane) render(scroll bool) bool {
	if p.m.action == 0 {
		return false
	}
	v := p.m.actionView(p.m.action)
	if v == nil {
		p.m.action = 0
		return false
	}
	p.place.showInstead(p.header(*v), actionDetails(*v), scroll)
	return true
}

// header is the action's pinned header: which action, its state
// and Approve / Reject, then its sentence as a heading.
func (p *actionsPane) header(v sandbox.ActionView) fyne.CanvasObject {
	n := slices.IndexFunc(p.m.actions, func(a sandbox.ActionView) bool { return a.ID == v.ID }) + 1
	title := newTipLabel(fmt.Sprintf("Action %d of %d · %s %s", n, len(p.m.actions), actionMethod(v), actionHost(v)), fyne.TextStyle{Bold: true})
	state := widget.NewLabel(actionState(v))
	approve := widget.NewButtonWithIcon("Approve action", theme.ConfirmIcon(), func() { p.setVerdict(v.ID, true) })
	reject := widget.NewButtonWithIcon("Reject action", theme.CancelIcon(), func() { p.setVerdict(v.ID, false) })
	if started(v) || p.readOnly {
		approve.Disable()
		reject.Disable()
	}
	row := container.NewBorder(nil, nil, widget.NewIcon(actionIcon(v)), container.NewHBox(state, approve, reject), title)
	sentence := widget.NewLabelWithStyle(safetext.Cut(heldreq.Describe(v.Held), actionSentenceMax), fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	sentence.SizeName = theme.SizeNameSubHeadingText
	sentence.Wrapping = fyne.TextWrapWord
	return container.NewVBox(row, sentence, widget.NewSeparator())
}

// actionDetails is what would be sent: method, host, path, query, the
// round that made it, its state, where a credential goes, the headers
// and the body; and the answer once sent.
func actionDetails(v sandbox.ActionView) []fyne.CanvasObject {
	facts := container.New(pairsLayout{})
	fact := func(key, value string) {
		facts.Add(widget.NewLabelWithStyle(key, fyne.TextAlignTrailing, fyne.TextStyle{Bold: true}))
		facts.Add(newTipLabel(value, fyne.TextStyle{Monospace: true}))
	}
	fact("Method", actionMethod(v))
	fact("Host", actionHost(v))
	fact("Path", guestLine(v.Path))
	if v.Query != "" {
		fact("Query", guestLine(v.Query))
	}
	fact("Made in", fmt.Sprintf("round %d", v.Round))
	fact("State", actionState(v)+stateNote(v))
	if v.Rule != "" {
		fact("Held by", "[[network.stage]] "+guestLine(v.Rule))
	}
	out := []fyne.CanvasObject{facts}

	if v.Secret != nil {
		out = append(out, wrapLabel(fmt.Sprintf("Your %s is put in its %s header when it is sent (the agent never saw it).",
			guestLine(v.Secret.Name), guestLine(v.Secret.Header)), fyne.TextStyle{}))
	}
	if len(v.Dropped) > 0 {
		names := make([]string, len(v.Dropped))
		for i, d := range v.Dropped {
			names[i] = safetext.Cut(safetext.Line(d), 80)
		}
		out = append(out, wrapLabel("Left out as credentials (never kept, so never sent): "+safetext.Cut(strings.Join(names, ", "), actionLineMax)+".", fyne.TextStyle{Italic: true}))
	}

	out = append(out, heading(fmt.Sprintf("Headers (%d)", len(v.Header))))
	if len(v.Header) == 0 {
		out = append(out, wrapLabel("None.", fyne.TextStyle{Italic: true}))
	}
	for _, name := range slices.Sorted(maps.Keys(v.Header)) {
		for _, value := range v.Header[name] {
			out = append(out, newTipLabel(safetext.Cut(safetext.Line(name), 80)+": "+guestLine(value), fyne.TextStyle{Monospace: true}))
		}
	}

	if len(v.Body) == 0 {
		out = append(out, heading("Body"), wrapLabel("None.", fyne.TextStyle{Italic: true}))
	} else {
		out = append(out, heading("Body ("+bytesize.Format(int64(len(v.Body)))+")"), wrapLabel(heldreq.PrettyBody(v.Held, actionBodyMax), fyne.TextStyle{Monospace: true}))
	}

	if s := v.Send; s != nil && (s.Status != 0 || s.Error != "") {
		out = append(out, heading("Answer"))
		if s.Status != 0 {
			out = append(out, newTipLabel(statusLine(s.Status), fyne.TextStyle{Monospace: true}))
		}
		if len(s.Body) > 0 {
			body := string(s.Body)
			if s.Truncated {
				body += "\n…"
			}
			out = append(out, wrapLabel(safetext.Text(safetext.Cut(body, actionBodyMax)), fyne.TextStyle{Monospace: true}))
		}
		if s.Error != "" {
			out = append(out, wrapLabel(safetext.Cut(safetext.Line(s.Error), actionLineMax), fyne.TextStyle{}))
		}
	}
	return out
}

// stateNote says what an action's state means for what the user can do.
func stateNote(v sandbox.ActionView) string {
	switch {
	case v.Send != nil && v.Send.State == sandbox.Sent:
		return ": it cannot be taken back"
	case v.Send != nil && v.Send.State == sandbox.Sending:
		return ": it is not sent again; check whether it arrived"
	case v.Send != nil && v.Send.Error != "":
		return ": nothing left this computer; Apply tries it again"
	}
	return ""
}

// actionMethod and actionHost are the request's method and host (with
// a port other than its scheme's), made safe and cut.
func actionMethod(v sandbox.ActionView) string { return safetext.Cut(safetext.Line(v.Method), 20) }

func actionHost(v sandbox.ActionView) string {
	h := v.Host
	if v.Port != 0 && !(v.Port == 443 && v.Scheme == "https") && !(v.Port == 80 && v.Scheme == "http") {
		h += ":" + strconv.Itoa(v.Port)
	}
	return safetext.Cut(safetext.Line(h), 120)
}

// guestLine is a line of the guest's made safe and cut.
func guestLine(s string) string {
	return safetext.Cut(safetext.Line(safetext.Cut(s, actionLineMax)), actionLineMax)
}

// actionIcon marks an action in the list and its header: held, approved,
// rejected, sent, or possibly sent.
func actionIcon(v sandbox.ActionView) fyne.Resource {
	switch {
	case v.Send != nil && v.Send.State == sandbox.Sent:
		return theme.NewSuccessThemedResource(theme.MailSendIcon())
	case v.Send != nil && v.Send.State == sandbox.Sending:
		return theme.NewWarningThemedResource(theme.MailSendIcon())
	}
	return verdictIcon(actionMark(v))
}

// wrapLabel is a label that wraps at words and so never widens its
// container.
func wrapLabel(text string, style fyne.TextStyle) *widget.Label {
	l := widget.NewLabelWithStyle(text, fyne.TextAlignLeading, style)
	l.Wrapping = fyne.TextWrapWord
	return l
}

// heading is a section's title in the action view.
func heading(text string) fyne.CanvasObject {
	return widget.NewLabelWithStyle(text, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
}
