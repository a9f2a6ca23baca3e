package gui

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

// The review model's staged actions: the requests the agent made that a
// [[network.stage]] entry held, each approved or rejected like a file
// (review.Decisions.Actions) and sent by Apply once the user agrees.

// action is the held action id with the review's verdict on it, or nil.
func (m *reviewModel) actionView(id int) *sandbox.ActionView {
	for _, v := range m.actions {
		if v.ID == id {
			v.Verdict = m.d.Actions[id]
			return &v
		}
	}
	return nil
}

// actionViews are the actions with the review's verdicts, in the order
// they were held.
func (m *reviewModel) actionViews() []sandbox.ActionView {
	out := make([]sandbox.ActionView, len(m.actions))
	for i, v := range m.actions {
		v.Verdict = m.d.Actions[v.ID]
		out[i] = v
	}
	return out
}

// setActions takes the actions as read again (after a send): their
// verdicts stay the review's.
func (m *reviewModel) setActions(actions []sandbox.ActionView) { m.actions = actions }

// started reports whether an action's sending started: it was sent, or
// may have been, and no verdict changes that.
func started(v sandbox.ActionView) bool {
	return v.Send != nil && v.Send.State != sandbox.NotSent
}

// setAction approves or rejects action id; false when its sending has
// started (a verdict would change nothing).
func (m *reviewModel) setAction(id int, approve bool) bool {
	v := m.actionView(id)
	if v == nil || started(*v) {
		return false
	}
	if m.d.Actions == nil {
		m.d.Actions = map[int]review.Verdict{}
	}
	m.d.Actions[id] = verdict(approve)
	return true
}

// toSend lists the approved actions that never left this computer (a
// failure before any byte left counts as never): what Apply sends.
func (m *reviewModel) toSend() []sandbox.ActionView {
	var out []sandbox.ActionView
	for _, v := range m.actionViews() {
		if v.Verdict == review.Approve && !started(v) {
			out = append(out, v)
		}
	}
	return out
}

// actionsState is the actions' mark together, as a folder's: all the
// same, or partly approved when they differ. A sent action counts as
// approved.
func (m *reviewModel) actionsState() fileState {
	vs := m.actionViews()
	if len(vs) == 0 {
		return stateUndecided
	}
	s := actionMark(vs[0])
	for _, v := range vs[1:] {
		if actionMark(v) != s {
			return statePartial
		}
	}
	return s
}

// actionMark is an action's verdict as a file's state.
func actionMark(v sandbox.ActionView) fileState {
	switch {
	case started(v), v.Verdict == review.Approve:
		return stateApproved
	case v.Verdict == review.Reject:
		return stateRejected
	}
	return stateUndecided
}

// actionsSummary counts the actions by state for the summary line
// ("2 actions: 1 approved · 1 held"); "" when there are none.
func (m *reviewModel) actionsSummary() string {
	vs := m.actionViews()
	if len(vs) == 0 {
		return ""
	}
	counts := map[string]int{}
	for _, v := range vs {
		counts[v.State()]++
	}
	var parts []string
	for _, st := range []string{"approved", "rejected", "sent", "may have been sent", "failed, not sent", "held"} {
		if n := counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	return fmt.Sprintf("%d %s: %s", len(vs), plural(len(vs), "action", "actions"), strings.Join(parts, " · "))
}

// actionState is where an action stands for people, with the answer's
// status once sent: "sent (201 Created)".
func actionState(v sandbox.ActionView) string {
	s := v.State()
	if v.Send != nil && v.Send.State == sandbox.Sent && v.Send.Status != 0 {
		s += " (" + statusLine(v.Send.Status) + ")"
	}
	return s
}

// statusLine is an HTTP status with its text: "201 Created".
func statusLine(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("%d %s", code, t)
	}
	return fmt.Sprint(code)
}
