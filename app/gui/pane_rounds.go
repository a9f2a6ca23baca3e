package gui

import (
	"context"
	"fmt"
	"image/color"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// roundsPane is the review window's rounds: the Transcript tab (what one
// round's command printed, with the prompt of the reply that started it,
// and a round selector once there are several) and Send back, a round
// run from this window, live in a tab of its own while it runs, ended by
// Stop the round.
type roundsPane struct {
	svc   RoundService
	id    string
	round int          // the sandbox's round (1 before any reply)
	full  *reviewModel // what Send back sends with the message
	win   fyne.Window  // where the Send back dialog opens
	tabs  tabHost      // where the live round's tab goes
	async func(func())
	ev    roundsEvents

	pick   *widget.Select // nil for a sandbox of one round
	prompt *widget.Label
	told   *widget.Accordion // holds prompt; hidden for round 1
	grid   *widget.TextGrid
	all    []byte // every round's transcript, shown when a round's cannot be read
	// live is the tab of the Send back round that runs or last ran.
	live     *container.TabItem
	liveTerm *terminal

	sendBtn *widget.Button
	// stopBtn ends a Send back round while it runs (stop cancels it;
	// nil when none runs).
	stopBtn *widget.Button
	stop    context.CancelFunc
}

// roundsEvents is what the rounds tell the window they are in.
type roundsEvents interface {
	// say shows a line on the status line.
	say(status string)
	// save keeps the review with the sandbox (what Send back sends).
	save()
	// roundRunning holds Apply while a round runs (on), and lets it go.
	roundRunning(on bool)
	// reviewChanged tells whoever follows the sandbox (the main window)
	// that it changed.
	reviewChanged()
	// nextRound follows a round that ended ready: the review opens
	// again on it.
	nextRound()
}

// tabHost is where a pane puts a tab of its own: the window's tabs.
type tabHost interface {
	Append(*container.TabItem)
	Remove(*container.TabItem)
	Select(*container.TabItem)
	Selected() *container.TabItem
	Refresh()
}

// newRoundsPane builds the rounds of sandbox id, at round (1 before any
// reply), its transcript as read; the window gives it its tabs once they
// are made.
// Its dialogs open on win; async runs a round off fyne's goroutine.
func newRoundsPane(svc RoundService, id string, round int, full *reviewModel, transcript []byte, win fyne.Window, async func(func()), ev roundsEvents) *roundsPane {
	p := &roundsPane{svc: svc, id: id, round: round, full: full, win: win, async: async, ev: ev,
		grid: widget.NewTextGrid(), prompt: widget.NewLabel(""), all: transcript}
	p.sendBtn = widget.NewButtonWithIcon("Send back to agent", theme.MailReplyIcon(), p.askSendBack)
	p.stopBtn = widget.NewButtonWithIcon("Stop the round", theme.MediaStopIcon(), p.stopRound)
	p.stopBtn.Hide()
	return p
}

// roundName is a round's name in the selector.
func roundName(n int) string { return fmt.Sprintf("Round %d", n) }

// transcriptTab builds the Transcript tab: the whole transcript for a
// sandbox of one round, else the latest round's, the others chosen with
// the selector.
func (p *roundsPane) transcriptTab() fyne.CanvasObject {
	p.prompt.Wrapping = fyne.TextWrapWord
	p.told = widget.NewAccordion(widget.NewAccordionItem("What the reply told the agent", p.prompt))
	if p.round < 2 {
		p.grid.SetText(plainTranscript(p.all))
		return wheelScroll(container.NewScroll(p.grid))
	}
	var names []string
	for n := 1; n <= p.round; n++ {
		names = append(names, roundName(n))
	}
	p.pick = widget.NewSelect(names, func(s string) {
		var n int
		fmt.Sscanf(s, "Round %d", &n)
		p.showTranscript(n)
	})
	p.pick.SetSelected(roundName(p.round))
	head := container.NewBorder(nil, nil, widget.NewLabel("Transcript of"), nil, p.pick)
	return container.NewBorder(head, nil, nil, nil, wheelScroll(container.NewScroll(container.NewVBox(p.told, p.grid))))
}

// showTranscript shows round n's transcript and the prompt that started
// it.
func (p *roundsPane) showTranscript(n int) {
	l, err := p.svc.RoundLog(p.id, n)
	switch {
	case err != nil:
		p.grid.SetText(safetext.Text("Cannot read round "+strconv.Itoa(n)+" apart ("+err.Error()+"); every round's transcript:") + "\n\n" + plainTranscript(p.all))
	case !l.Kept:
		p.grid.SetText(fmt.Sprintf("Round %d's transcript was not kept apart (an older Airlock kept this round): the latest round's holds it.", n))
	default:
		p.grid.SetText(plainTranscript(l.Transcript))
	}
	if err == nil && strings.TrimSpace(l.Prompt) != "" {
		p.prompt.SetText(safetext.Text(l.Prompt))
		p.told.Show()
	} else {
		p.prompt.SetText("")
		p.told.Hide()
	}
	if p.pick != nil && p.pick.Selected != roundName(n) {
		p.pick.SetSelected(roundName(n))
	}
}

// showLiveRound opens a tab with the terminal round n's command runs in
// (a Send back round), in front, and returns the terminal.
func (p *roundsPane) showLiveRound(n int) *terminal {
	term := newTerminal(100, 30)
	if p.live != nil {
		p.tabs.Remove(p.live)
	}
	p.live, p.liveTerm = container.NewTabItemWithIcon(fmt.Sprintf("Round %d (running)", n), theme.MediaPlayIcon(), term), term
	p.tabs.Append(p.live)
	p.tabs.Select(p.live)
	return term
}

// liveRoundEnded names the live round's tab after how it ended.
func (p *roundsPane) liveRoundEnded(n int, err error) {
	if p.live == nil {
		return
	}
	p.live.Text, p.live.Icon = fmt.Sprintf("Round %d", n), theme.ListIcon()
	if err != nil {
		p.live.Text, p.live.Icon = fmt.Sprintf("Round %d (failed)", n), theme.ErrorIcon()
	}
	p.tabs.Refresh()
}

// watching reports whether the live round's tab is in front.
func (p *roundsPane) watching() bool {
	return p.live != nil && p.tabs.Selected() == p.live
}

// setReadOnly offers Send back, or not in a round's read-only view.
func (p *roundsPane) setReadOnly(on bool) {
	if on {
		p.sendBtn.Disable()
	} else {
		p.sendBtn.Enable()
	}
}

// sendBackHint says what "Send back to agent" sends.
const sendBackHint = "Send back: the agent gets your message, your comments not sent yet and the hunks you rejected, and works on its result in a new round."

// sendBackWidth and sendBackRows size the Send back dialog's message
// box: room for a paragraph, wrapped.
const (
	sendBackWidth = 520
	sendBackRows  = 6
)

// feedback is what a Send back would carry with its message, from the
// review as it stands in the window.
func (p *roundsPane) feedback() review.Feedback {
	d := p.full.decisions()
	d.MigrateLegacy(p.full.cs)
	return d.Feedback(p.full.cs)
}

// sendBackForm is the Send back dialog's content: a wide, wrapping
// message box and a line that says what goes with the message.
func sendBackForm(fb review.Feedback) (fyne.CanvasObject, *widget.Entry) {
	msg := widget.NewMultiLineEntry()
	msg.Wrapping = fyne.TextWrapWord
	msg.SetPlaceHolder("What should the agent do differently?")
	msg.SetMinRowsVisible(sendBackRows)
	what := widget.NewLabel(sendBackWhat(fb))
	what.Wrapping = fyne.TextWrapWord
	// The width is the form's own, never the content's.
	width := canvas.NewRectangle(color.Transparent)
	width.SetMinSize(fyne.NewSize(sendBackWidth, 0))
	form := container.NewVBox(widget.NewLabelWithStyle("Your message to the agent", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), msg, what)
	return container.NewStack(width, form), msg
}

// sendBackWhat says what goes with the message.
func sendBackWhat(fb review.Feedback) string {
	if fb.Empty() {
		return "Only your message will be sent: the review has no comments to send and no rejected hunks."
	}
	return "With it, " + fb.Summary() + " will be sent. Each comment is sent once; resolved comments stay here."
}

// askSendBack asks for the message to the agent, then sends the sandbox
// back.
func (p *roundsPane) askSendBack() {
	form, msg := sendBackForm(p.feedback())
	d := dialog.NewCustomConfirm("Send back to the agent", "Send", "Cancel", form, func(ok bool) {
		if ok {
			p.sendBack(msg.Text)
		}
	}, p.win)
	d.Show()
	p.win.Canvas().Focus(msg)
}

// sendBack saves the review (its comments and rejections go to the
// agent) and sends the sandbox back with message for another round, its
// output live in a terminal tab; the status line then says how the round
// ended, and the window's followers are told.
func (p *roundsPane) sendBack(message string) {
	if strings.TrimSpace(message) == "" {
		p.ev.say("Say what the agent should do differently.")
		return
	}
	p.ev.save()
	p.sendBtn.Disable()
	p.ev.roundRunning(true)
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.stopBtn.Enable()
	p.stopBtn.Show()
	next := p.round + 1
	term := p.showLiveRound(next)
	p.ev.say(fmt.Sprintf("Sent back: round %d is starting…", next))
	req := ReplyRequest{ID: p.id, Message: message, Output: term, Input: term.Input(), TTY: term.TTY(),
		Progress: func(pr pipeline.Progress) {
			msg := safetext.Line(pr.Message) // it may name the guest's paths
			if msg == "" {
				msg = string(pr.Step)
			}
			fyne.Do(func() {
				if p.stop != nil {
					p.ev.say(fmt.Sprintf("Round %d: %s", next, msg))
				}
			})
		}}
	p.async(func() {
		res, err := p.svc.Reply(ctx, req)
		stopped := ctx.Err() != nil
		cancel()
		term.Close()
		fyne.Do(func() {
			p.stop = nil
			p.stopBtn.Hide()
			p.sendBtn.Enable()
			p.ev.roundRunning(false)
			p.liveRoundEnded(next, err)
			switch {
			case err != nil && stopped:
				p.ev.say("Round stopped: its VM is gone, and the sandbox is marked failed (its earlier rounds are kept).")
				p.ev.reviewChanged()
				return
			case err != nil:
				p.ev.say("Send back failed")
				fmt.Fprintf(term, "\r\n\x1b[1;31mairlock: %s\x1b[0m\r\n", strings.ReplaceAll(err.Error(), "\n", "\r\n"))
				dialog.ShowError(err, p.win)
				return
			}
			p.ev.say(fmt.Sprintf("Round %d is ready.", res.Meta.Round))
			p.ev.reviewChanged()
			p.ev.nextRound()
		})
	})
}

// stopRound ends the Send back round that runs, if any: its VM is
// stopped and the round ends as failed.
func (p *roundsPane) stopRound() {
	if p.stop == nil {
		return
	}
	p.stopBtn.Disable()
	p.ev.say("Stopping the round…")
	p.stop()
}
