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

// showAction shows action id in the diff pane's place.
func (r *ReviewWindow) showAction(id int) {
	r.m.action = id
	r.setFolder("") // no file is selected: the folder buttons act on all
	r.showFile()
}

// selectAction selects action id's row (its group unfolded) and shows
// it.
func (r *ReviewWindow) selectAction(id int) {
	r.tree.Select(actionRowID(id)) // OnSelected shows it
	r.tree.ScrollTo(actionRowID(id))
	if r.m.action != id {
		r.showAction(id)
	}
}

// setActionVerdict approves or rejects action id, saved with the files'
// verdicts; one whose sending started cannot be decided again.
func (r *ReviewWindow) setActionVerdict(id int, approve bool) {
	if r.roundOnly {
		return
	}
	if !r.m.setAction(id, approve) {
		if v := r.m.actionView(id); v != nil {
			r.status.SetText(fmt.Sprintf("Action %d is %s: a verdict changes nothing now.", id, actionState(*v)))
		}
		return
	}
	r.refresh()
	r.showFile()
}

// actionKey handles a review key while an action is shown: a / A
// approve it, r / R reject it, n / j the next action, p / k the one
// before (from the first, back to the last file). It reports whether ch
// is one of them.
func (r *ReviewWindow) actionKey(ch rune) bool {
	vs := r.m.actionViews()
	i := slices.IndexFunc(vs, func(v sandbox.ActionView) bool { return v.ID == r.m.action })
	if i < 0 {
		return false
	}
	switch ch {
	case 'a', 'A', 'r', 'R':
		r.setActionVerdict(r.m.action, ch == 'a' || ch == 'A')
	case 'n', 'j':
		if i+1 < len(vs) {
			r.selectAction(vs[i+1].ID)
		}
	case 'p', 'k':
		if i > 0 {
			r.selectAction(vs[i-1].ID)
			return true
		}
		if len(r.m.files) == 0 {
			return true
		}
		// Back to the last file, at its last hunk for k.
		r.m.action = 0
		r.m.file, r.m.hunk = len(r.m.files)-1, 0
		if f := r.m.current(); ch == 'k' && len(f.Hunks) > 0 {
			r.m.hunk = len(f.Hunks) - 1
		}
		r.selectCurrent()
	default:
		return false
	}
	return true
}

// enterActions goes on from the last file to the first action: n on
// the last file, j on its last hunk. It reports whether it did.
func (r *ReviewWindow) enterActions(ch rune) bool {
	if len(r.m.actions) == 0 || (ch != 'n' && ch != 'j') {
		return false
	}
	f := r.m.current()
	if len(r.m.files) > 0 && r.m.file < len(r.m.files)-1 {
		return false
	}
	if ch == 'j' && f != nil && r.m.hunk < len(f.Hunks)-1 {
		return false
	}
	r.selectAction(r.m.actions[0].ID)
	return true
}

// renderAction draws action v in the diff pane's place: its sentence and
// verdict above, what would be sent below.
func (r *ReviewWindow) renderAction(v sandbox.ActionView, scroll bool) {
	r.diff.RemoveAll()
	r.hunkBoxes, r.hunkCheck, r.dv.bars, r.dv.codes = nil, nil, nil, nil
	r.dv.cards = map[int]fyne.CanvasObject{}
	r.dv.head.Objects = []fyne.CanvasObject{r.actionHeader(v)}
	r.dv.pane.Refresh()
	for _, o := range actionDetails(v) {
		appendTo(r.diff, o)
	}
	r.diff.Refresh()
	r.diffScrl.Refresh()
	if scroll {
		r.diffScrl.ScrollToTop()
	}
}

// actionHeader is the action's pinned header: which action, its state
// and Approve / Reject, then its sentence as a heading.
func (r *ReviewWindow) actionHeader(v sandbox.ActionView) fyne.CanvasObject {
	n := slices.IndexFunc(r.m.actions, func(a sandbox.ActionView) bool { return a.ID == v.ID }) + 1
	title := newTipLabel(fmt.Sprintf("Action %d of %d · %s %s", n, len(r.m.actions), actionMethod(v), actionHost(v)), fyne.TextStyle{Bold: true})
	state := widget.NewLabel(actionState(v))
	approve := widget.NewButtonWithIcon("Approve action", theme.ConfirmIcon(), func() { r.setActionVerdict(v.ID, true) })
	reject := widget.NewButtonWithIcon("Reject action", theme.CancelIcon(), func() { r.setActionVerdict(v.ID, false) })
	if started(v) || r.roundOnly {
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
	facts := container.New(keysLayout{})
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

// updateAction draws the row of the actions' group or of one action:
// its mark, its method and host, and its sentence.
func (w *fileRow) updateAction(row listRow) {
	r := w.l.r
	w.warn.Hide()
	w.stale.Hide()
	w.add.Hide()
	w.del.Hide()
	w.partly.Hide()
	w.name.TextStyle = fyne.TextStyle{}
	w.name.Color = theme.Color(theme.ColorNameForeground)
	if row.id == actionsGroup {
		w.indent.SetMinSize(fyne.NewSize(float32(row.depth*indentStep), 1))
		w.fold.Show()
		if w.l.closed[actionsGroup] {
			w.fold.SetResource(theme.MenuExpandIcon())
		} else {
			w.fold.SetResource(theme.MenuDropDownIcon())
		}
		w.letter.Hide()
		w.host.Hide()
		w.name.TextStyle = fyne.TextStyle{Bold: true}
		w.setName(fmt.Sprintf("Actions (%d)", len(r.m.actions)))
		w.verdict.Resource = verdictIcon(r.m.actionsState())
		// What is left to decide, where a folder says "partly".
		held := 0
		for _, v := range r.m.actionViews() {
			if v.State() == "held" {
				held++
			}
		}
		if held > 0 {
			w.partly.Color = theme.Color(theme.ColorNameWarning)
			w.partly.Text = fmt.Sprintf("%d held", held)
			w.partly.Show()
		}
	} else {
		w.indent.SetMinSize(fyne.NewSize(float32(row.depth*indentStep)+rowIcon+rowGap, 1))
		w.fold.Hide()
		v := r.m.actionView(row.action)
		if v == nil {
			return
		}
		w.letter.Text = actionMethod(*v)
		w.letter.Color = theme.Color(theme.ColorNamePrimary)
		w.letter.Show()
		w.host.Text = safetext.Cut(actionHost(*v), 40)
		w.host.Color = theme.Color(theme.ColorNamePlaceHolder)
		w.host.Show()
		if actionMark(*v) == stateRejected {
			w.name.TextStyle = fyne.TextStyle{Italic: true}
			w.name.Color = theme.Color(theme.ColorNamePlaceHolder)
		}
		// A sentence that is only the request starts with its method,
		// shown before it already.
		w.setName(safetext.Cut(strings.TrimPrefix(heldreq.Describe(v.Held), w.letter.Text+" "), actionSentenceMax))
		w.verdict.Resource = actionIcon(*v)
		if st := v.State(); st != "approved" && st != "rejected" && st != "held" {
			w.partly.Text = st
			w.partly.Color = theme.Color(theme.ColorNameWarning)
			if st == "sent" {
				w.partly.Color = theme.Color(theme.ColorNameSuccess)
			}
			w.partly.Show()
		}
	}
	w.verdict.Refresh()
	w.partly.Refresh()
	w.letter.Refresh()
	w.host.Refresh()
	w.name.Refresh()
	w.box.Refresh()
}
