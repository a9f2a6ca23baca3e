package gui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/heldreq"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// Sending the approved actions: Apply asks once before any leaves this
// computer (undo cannot unsend), sends them through the ActionService after
// the files are written, and shows what each one's service answered.

// askSend asks once whether sends, the approved actions never sent, are
// to be sent from this computer: it lists their sentences and says that
// undo cannot unsend them; files says approved files are written first.
// With none to send the answer is yes at once.
func (p *actionsPane) askSend(sends []sandbox.ActionView, files bool, answer func(send bool)) {
	if len(sends) == 0 {
		answer(true)
		return
	}
	n := len(sends)
	title := fmt.Sprintf("Send %d %s?", n, plural(n, "action", "actions"))
	dialog.NewCustomConfirm(title, "Send", "Cancel", sendForm(sends, files), answer, p.win).Show()
}

// sendForm is the question's content: the actions' sentences, and what
// cannot be undone.
func sendForm(sends []sandbox.ActionView, files bool) fyne.CanvasObject {
	n := len(sends)
	intro := wrapLabel(fmt.Sprintf("%d approved %s will be sent from this computer:", n, plural(n, "action", "actions")), fyne.TextStyle{})
	list := container.NewVBox()
	for _, v := range sends {
		list.Add(container.NewBorder(nil, nil, widget.NewIcon(theme.MailSendIcon()), nil, wrapLabel(safetext.Cut(heldreq.Describe(v.Held), actionSentenceMax), fyne.TextStyle{Bold: true})))
	}
	var shown fyne.CanvasObject = list
	if n > 4 {
		s := container.NewVScroll(list)
		s.SetMinSize(fyne.NewSize(dialogWidth, 260))
		shown = s
	}
	last := "Undo cannot unsend " + plural(n, "it.", "them.")
	if files {
		last = "The approved files are written first, then the " + plural(n, "action is", "actions are") + " sent. " + last
	}
	return fixedWidth(dialogWidth, container.NewVBox(intro, shown, wrapLabel(last, fyne.TextStyle{Bold: true})))
}

// send sends the saved review's approved actions never sent
// (the user said yes), in their order, then shows each one's answer and
// the actions as they now stand; done is what the apply before it did,
// for the status line.
func (p *actionsPane) send(done string) {
	pending := p.full.toSend()
	prefix := ""
	if done != "" {
		prefix = done + " "
	}
	p.ev.say(prefix + fmt.Sprintf("Sending %d %s…", len(pending), plural(len(pending), "action", "actions")))
	p.async(func() {
		results, err := p.svc.SendActions(context.Background(), p.id, func(res sandbox.ActionResult) {
			fyne.Do(func() { p.ev.say(prefix + fmt.Sprintf("Action %d: %s.", res.ID, resultWord(res))) })
		})
		fyne.Do(func() {
			p.reload()
			// The summary is of what this apply meant to send, not of
			// the approved ones an earlier apply sent.
			mine := slices.DeleteFunc(slices.Clone(results), func(res sandbox.ActionResult) bool {
				return !slices.ContainsFunc(pending, func(v sandbox.ActionView) bool { return v.ID == res.ID })
			})
			p.ev.say(prefix + sendSummary(mine, err))
			p.showSendResults(pending, results, err)
			p.ev.reviewChanged()
		})
	})
}

// reload reads the actions again (how their sending stands) and
// redraws them.
func (p *actionsPane) reload() {
	actions, err := p.svc.Actions(p.id)
	if err != nil {
		p.ev.say("Cannot read the actions again: " + err.Error())
		return
	}
	p.full.setActions(actions)
	p.ev.actionsReloaded()
}

// resultWord is a result in a few words, for the status line.
func resultWord(res sandbox.ActionResult) string {
	switch {
	case res.State == sandbox.Sent && res.Already:
		return "sent before"
	case res.State == sandbox.Sent && res.Status >= 400:
		return "refused (" + statusLine(res.Status) + ")"
	case res.State == sandbox.Sent:
		return "sent (" + statusLine(res.Status) + ")"
	case res.State == sandbox.Sending:
		return "may have been sent"
	}
	return "failed, not sent"
}

// sendSummary is the status line after sending: how many went, and
// how many did not.
func sendSummary(results []sandbox.ActionResult, err error) string {
	counts := map[string]int{}
	var order []string
	for _, res := range results {
		w := resultWord(res)
		if strings.HasPrefix(w, "sent (") {
			w = "sent"
		} else if strings.HasPrefix(w, "refused") {
			w = "refused by the service"
		}
		if counts[w] == 0 {
			order = append(order, w)
		}
		counts[w]++
	}
	var parts []string
	for _, w := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[w], w))
	}
	s := "Actions: " + strings.Join(parts, ", ") + "."
	if len(parts) == 0 {
		s = "No action sent."
	}
	if err != nil {
		s += " Sending stopped: " + safetext.Line(err.Error())
	}
	return s
}

// showSendResults shows each action Apply meant to send with what became
// of it: the status its service answered, or the error and what to do.
func (p *actionsPane) showSendResults(pending []sandbox.ActionView, results []sandbox.ActionResult, err error) {
	byID := map[int]sandbox.ActionResult{}
	for _, res := range results {
		byID[res.ID] = res
	}
	list := container.NewVBox()
	good := err == nil
	for _, v := range pending {
		res, ok := byID[v.ID]
		icon, what := resultText(v, res, ok, err)
		if !ok || res.Error != "" || res.Status >= 400 {
			good = false
		}
		list.Add(container.NewBorder(nil, nil, container.NewVBox(widget.NewIcon(icon)), nil,
			container.NewVBox(wrapLabel(safetext.Cut(heldreq.Describe(v.Held), actionSentenceMax), fyne.TextStyle{Bold: true}), wrapLabel(what, fyne.TextStyle{}))))
	}
	var shown fyne.CanvasObject = list
	if len(pending) > 3 {
		s := container.NewVScroll(list)
		s.SetMinSize(fyne.NewSize(dialogWidth, 320))
		shown = s
	}
	title := "Actions sent"
	if !good {
		title = "Not every action was sent"
	}
	dialog.NewCustom(title, "Close", fixedWidth(dialogWidth, shown), p.win).Show()
}

// resultText is what became of action v (res, when ok; err stopped the
// sending) and what to do about it, with its icon.
func resultText(v sandbox.ActionView, res sandbox.ActionResult, ok bool, err error) (fyne.Resource, string) {
	host := actionHost(v)
	warn := theme.NewWarningThemedResource(theme.WarningIcon())
	switch {
	case !ok && err != nil:
		return warn, "Not sent: sending stopped (" + safetext.Cut(safetext.Line(err.Error()), actionLineMax) + "). Apply tries it again."
	case !ok:
		return warn, "Not sent yet: an action before it did not go through, and actions are sent in their order. Apply sends it after that one."
	case res.State == sandbox.Sent && res.Already:
		return theme.NewSuccessThemedResource(theme.MailSendIcon()), "Sent by an earlier apply (" + statusLine(res.Status) + "); it is not sent again."
	case res.State == sandbox.Sent && res.Status >= 400:
		return theme.NewErrorThemedResource(theme.ErrorIcon()), fmt.Sprintf("Sent, but %s refused it: %s%s. It is not sent again: make the change yourself, or send the agent back to do it another way.",
			host, statusLine(res.Status), answerSnippet(res.Body))
	case res.State == sandbox.Sent:
		return theme.NewSuccessThemedResource(theme.MailSendIcon()), fmt.Sprintf("Sent: %s answered %s.", host, statusLine(res.Status))
	case res.State == sandbox.Sending:
		return warn, fmt.Sprintf("May have been sent: %s. It is never sent twice: check on %s whether it arrived.", safetext.Cut(safetext.Line(res.Error), actionLineMax), host)
	}
	return theme.NewErrorThemedResource(theme.ErrorIcon()), fmt.Sprintf("Not sent: %s. Nothing left this computer; once that is mended, Apply sends it.", strings.TrimSuffix(safetext.Cut(safetext.Line(res.Error), actionLineMax), "."))
}

// answerSnippet is the start of a service's answer, on one line (" —
// {"message":…}"), or "".
func answerSnippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if s == "" {
		return ""
	}
	return " — " + safetext.Line(safetext.Cut(s, 200))
}
