package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/internal/filelock"
	"github.com/airlock-dev/airlock/review"
)

// Staged actions are requests the agent made to an API that a
// [[network.stage]] entry holds: the proxy answered them and they wait
// here, one file each, as review items beside the files. Approved ones
// are sent from the host by SendActions, at most once each, in their
// original order.

// ActionsDir holds the sandbox's held requests (NNNN.json) and the
// journal of their sending (SentFile).
const ActionsDir = "actions"

// SentFile is the journal of sending under ActionsDir: an action is
// marked "sending" (durably) before its request starts, and "sent" or
// "failed" after, so that an interrupted apply resumes without sending
// anything twice.
const SentFile = "sent.json"

// Audit events of staged actions, each with the action's number
// ("action"), which the held request's egress record carries too.
const (
	EventActionHeld     EventKind = "action-held"
	EventActionApproved EventKind = "action-approved"
	EventActionRejected EventKind = "action-rejected"
	// EventActionUndecided: an earlier verdict taken back.
	EventActionUndecided EventKind = "action-undecided"
	EventActionSent      EventKind = "action-sent"
)

// Action is a held request of the sandbox.
type Action struct {
	// ID numbers the sandbox's actions from 1 in the order they were
	// held, across rounds.
	ID int `json:"id"`
	// Round is the round whose agent made the request.
	Round int `json:"round"`
	egress.Held
}

// SendState is where an action's sending stands.
type SendState string

const (
	// NotSent: never tried, or tried and refused before any byte left
	// (it may be sent again).
	NotSent SendState = ""
	// Sending: its request started and no answer was recorded; after a
	// crash it may or may not have arrived, and it is never sent again.
	Sending SendState = "sending"
	// Sent: the upstream answered (whatever the status).
	Sent SendState = "sent"
)

// SendRecord is the journal's entry for one action.
type SendRecord struct {
	State SendState `json:"state"`
	Time  time.Time `json:"time"`
	// Status, Body and Truncated are the upstream's answer (Body at most
	// egress.MaxSentBody bytes).
	Status    int    `json:"status,omitempty"`
	Body      []byte `json:"body,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// Error says why it failed: with State Sending, the request may have
	// arrived; with NotSent, nothing left.
	Error string `json:"error,omitempty"`
}

// ActionView is an action with its verdict and how its sending stands,
// for listings.
type ActionView struct {
	Action
	Verdict review.Verdict `json:"verdict,omitempty"`
	Send    *SendRecord    `json:"send,omitempty"`
}

// State names where the action stands for people: held, approved,
// rejected, sent, failed, or "may have been sent".
func (v ActionView) State() string {
	switch {
	case v.Send != nil && v.Send.State == Sent:
		return "sent"
	case v.Send != nil && v.Send.State == Sending:
		return "may have been sent"
	case v.Send != nil && v.Send.Error != "" && v.Verdict == review.Approve:
		return "failed, not sent"
	case v.Verdict == review.Approve:
		return "approved"
	case v.Verdict == review.Reject:
		return "rejected"
	}
	return "held"
}

// MaxActions is the most actions one sandbox holds: a request beyond it
// is refused, so that an agent cannot fill the host's disk through it.
const MaxActions = 1000

// maxActionFile caps an action file read back: the body cap and room
// for its headers.
const maxActionFile = 3*egress.MaxStageBody + 1<<20

// HoldAction keeps a held request as the sandbox's next action, made in
// round, and returns its number. It is egress.Config.Hold for a run's
// proxy; concurrent calls (from several processes too) get distinct
// numbers.
func (sb *Sandbox) HoldAction(h egress.Held, round int) (int, error) {
	dir := sb.Path(ActionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	unlock, err := filelock.Lock(filepath.Join(dir, ".lock"))
	if err != nil {
		return 0, err
	}
	defer unlock()
	ids, err := sb.actionIDs()
	if err != nil {
		return 0, err
	}
	if len(ids) >= MaxActions {
		return 0, fmt.Errorf("the sandbox already holds %d actions, the most it keeps; review them (airlock actions %s) and start a new run", len(ids), sb.ID)
	}
	a := Action{ID: 1, Round: round, Held: h}
	if len(ids) > 0 {
		a.ID = ids[len(ids)-1] + 1
	}
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return 0, err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, actionFile(a.ID)), data, 0o600); err != nil {
		return 0, err
	}
	if err := sb.Audit(Event{Event: EventActionHeld, Data: actionEvent(a, nil)}); err != nil {
		return 0, err
	}
	return a.ID, nil
}

func actionFile(id int) string { return fmt.Sprintf("%04d.json", id) }

// actionIDs lists the numbers of the held actions, ascending.
func (sb *Sandbox) actionIDs() ([]int, error) {
	entries, err := os.ReadDir(sb.Path(ActionsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(name); err == nil && n > 0 && actionFile(n) == e.Name() {
			// Not a regular file: readAction says so.
			ids = append(ids, n)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Actions returns the sandbox's held actions in the order they were
// held.
func (sb *Sandbox) Actions() ([]Action, error) {
	ids, err := sb.actionIDs()
	if err != nil {
		return nil, fmt.Errorf("actions of %s: %w", sb.ID, err)
	}
	out := make([]Action, 0, len(ids))
	for _, id := range ids {
		a, err := sb.readAction(id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func (sb *Sandbox) readAction(id int) (Action, error) {
	var a Action
	p := sb.Path(filepath.Join(ActionsDir, actionFile(id)))
	fi, err := os.Lstat(p)
	if err != nil {
		return a, fmt.Errorf("action %d of %s: %w", id, sb.ID, err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxActionFile {
		return a, fmt.Errorf("action %d of %s: %s is not a held request", id, sb.ID, p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return a, fmt.Errorf("action %d of %s: %w", id, sb.ID, err)
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("action %d of %s: %w", id, sb.ID, err)
	}
	if a.ID != id {
		return a, fmt.Errorf("action %d of %s: the file says it is action %d", id, sb.ID, a.ID)
	}
	return a, nil
}

// Action returns the held action id.
func (sb *Sandbox) Action(id int) (Action, error) {
	ids, err := sb.actionIDs()
	if err != nil {
		return Action{}, err
	}
	if !slices.Contains(ids, id) {
		if len(ids) == 0 {
			return Action{}, fmt.Errorf("%s has no held actions", sb.ID)
		}
		return Action{}, fmt.Errorf("%s has no action %d (it has 1 to %d)", sb.ID, id, ids[len(ids)-1])
	}
	return sb.readAction(id)
}

// SendJournal reads the journal of sending: each action tried, by number.
func (sb *Sandbox) SendJournal() (map[int]SendRecord, error) {
	out := map[int]SendRecord{}
	data, err := os.ReadFile(sb.Path(filepath.Join(ActionsDir, SentFile)))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("the journal of %s's sent actions (%s) is unreadable: %w; nothing will be sent until it is mended or removed", sb.ID, sb.Path(filepath.Join(ActionsDir, SentFile)), err)
	}
	return out, nil
}

func (sb *Sandbox) writeSendJournal(j map[int]SendRecord) error {
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(sb.Path(filepath.Join(ActionsDir, SentFile)), data, 0o600)
}

// ActionViews returns the held actions with their verdicts in d and
// their sending.
func (sb *Sandbox) ActionViews(d review.Decisions) ([]ActionView, error) {
	as, err := sb.Actions()
	if err != nil || len(as) == 0 {
		return nil, err
	}
	j, err := sb.SendJournal()
	if err != nil {
		return nil, err
	}
	out := make([]ActionView, len(as))
	for i, a := range as {
		out[i] = ActionView{Action: a, Verdict: d.Actions[a.ID]}
		if r, ok := j[a.ID]; ok {
			out[i].Send = &r
		}
	}
	return out, nil
}

// ActionResult is what SendActions did with one action.
type ActionResult struct {
	ID     int    `json:"id"`
	Method string `json:"method"`
	URL    string `json:"url"`
	// State is where it stands now; Already says it stood there before
	// this apply (sent, or possibly sent, by an earlier one), so it was
	// not sent again.
	State   SendState `json:"state"`
	Already bool      `json:"already,omitempty"`
	Status  int       `json:"status,omitempty"`
	Body    []byte    `json:"body,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// SendFunc sends one action from the host (egress.Proxy.Send with the
// action's secret looked up).
type SendFunc func(ctx context.Context, a Action) (egress.Sent, error)

// SendActions sends the actions ids (approved by the caller) in the
// order they were held, each at most once: the journal marks one
// "sending", durably, before its request starts, and what came back
// after. An action the journal shows as sent or sending is not sent
// again (an apply that crashed mid-request never repeats it: the user
// is told it may have arrived). One that failed before any byte left is
// tried again. Sending stops at the first action that fails, so that
// later ones never overtake it; report, if set, gets each result as it
// comes. A result's error is in the result, not the returned error, which
// is for the journal itself.
func (sb *Sandbox) SendActions(ctx context.Context, ids []int, send SendFunc, report func(ActionResult)) ([]ActionResult, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	m, err := sb.Meta()
	if err != nil {
		return nil, err
	}
	if m.Status != StatusReady && m.Status != StatusApplied {
		return nil, fmt.Errorf("send the actions of %s: it is %s; they are sent once its run has ended and been reviewed: %w", sb.ID, m.Status, ErrNotReady)
	}
	dir := sb.Path(ActionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	unlock, err := filelock.Lock(filepath.Join(dir, ".send.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	j, err := sb.SendJournal()
	if err != nil {
		return nil, err
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if report == nil {
		report = func(ActionResult) {}
	}
	var out []ActionResult
	for _, id := range ids {
		a, err := sb.Action(id)
		if err != nil {
			return out, err
		}
		res := ActionResult{ID: id, Method: a.Method, URL: a.URL()}
		if prev, ok := j[id]; ok && prev.State != NotSent {
			res.State, res.Already, res.Status, res.Body, res.Error = prev.State, true, prev.Status, prev.Body, prev.Error
			out = append(out, res)
			report(res)
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		j[id] = SendRecord{State: Sending, Time: sb.store.now().UTC()}
		if err := sb.writeSendJournal(j); err != nil {
			return out, err
		}
		sent, serr := send(ctx, a)
		rec := SendRecord{State: Sent, Time: sb.store.now().UTC(), Status: sent.Status, Body: sent.Body, Truncated: sent.Truncated}
		switch {
		case serr != nil && !sent.Wrote:
			rec.State, rec.Error = NotSent, serr.Error()
		case serr != nil:
			rec.State, rec.Error = Sending, serr.Error()
		}
		j[id] = rec
		if err := sb.writeSendJournal(j); err != nil {
			return out, err
		}
		res.State, res.Status, res.Body, res.Error = rec.State, rec.Status, rec.Body, rec.Error
		_ = sb.Audit(Event{Event: EventActionSent, Data: actionEvent(a, &rec)})
		out = append(out, res)
		report(res)
		if serr != nil {
			break
		}
	}
	return out, nil
}

// auditVerdicts records the verdicts given now on actions ids (an
// approval, a rejection, or taking one back) as audit events.
func (sb *Sandbox) auditVerdicts(ids []int, verdicts map[int]review.Verdict) error {
	slices.Sort(ids)
	for _, id := range ids {
		a, err := sb.Action(id)
		if err != nil {
			continue // a verdict on an action that is not there is kept, and does nothing
		}
		kind := EventActionApproved
		switch verdicts[id] {
		case review.Reject:
			kind = EventActionRejected
		case review.Undecided:
			kind = EventActionUndecided
		}
		if err := sb.Audit(Event{Event: kind, Data: actionEvent(a, nil)}); err != nil {
			return err
		}
	}
	return nil
}

// actionEvent is an action as the audit log keeps it: its number, round
// and target, never its body or headers; with the answer's status when
// sent.
func actionEvent(a Action, r *SendRecord) map[string]any {
	ev := map[string]any{"action": a.ID, "round": a.Round, "method": a.Method, "host": a.Host, "port": a.Port, "path": a.Path, "rule": a.Rule, "body_bytes": len(a.Body)}
	if a.Secret != nil {
		ev["secret"] = a.Secret.Name
	}
	if r != nil {
		ev["state"] = string(r.State)
		if r.Status != 0 {
			ev["status"] = r.Status
			ev["status_text"] = http.StatusText(r.Status)
		}
		if len(r.Body) > 0 {
			b := r.Body
			if len(b) > 4096 {
				b = b[:4096]
			}
			ev["answer"] = string(b)
		}
		if r.Error != "" {
			ev["error"] = r.Error
		}
	}
	return ev
}

// Approved lists the actions d approves, in order.
func Approved(d review.Decisions) []int {
	var ids []int
	for id, v := range d.Actions {
		if v == review.Approve {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Unsent lists the actions among ids that the journal shows as never
// sent (nothing left for them yet): what an apply would send now.
func (sb *Sandbox) Unsent(ids []int) ([]int, error) {
	j, err := sb.SendJournal()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, id := range ids {
		if j[id].State == NotSent {
			out = append(out, id)
		}
	}
	return out, nil
}
