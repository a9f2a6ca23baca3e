package gui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/vm/image"
)

// fakeService is an in-memory AppService (every window's service):
// fixed sandboxes and changesets, and a record of what Apply and Run
// were given.
type fakeService struct {
	mu         sync.Mutex
	infos      []sandbox.Info
	changesets map[string]*review.Changeset
	summary    string
	transcript string
	verifyLog  string
	applied    []review.Decisions
	applyRes   *sandbox.ApplyResult
	undos      int
	saved      map[string]review.Decisions
	runs       []RunRequest
	stale      sandbox.Staleness
	replies    []string
	// rounds holds what a sandbox's last round changed, by sandbox ID.
	rounds map[string]*review.Changeset
	// run, if set, plays a run; reply, if set, a Send back round.
	run   func(ctx context.Context, req RunRequest) (*pipeline.RunResult, error)
	reply func(ctx context.Context, req ReplyRequest) (*pipeline.RunResult, error)
	// roundLogs are the rounds of a sandbox, by sandbox ID, from round 1.
	roundLogs map[string][]sandbox.RoundLog
	// discarded are the sandboxes Discard removed; setup is RunSetup's
	// answer (Airlock's default limits and no image when nil); built are
	// the images CheckImage finds (every one when nil).
	discarded []string
	setup     *RunSetup
	built     []string
	// applyOpts records the options of each ApplyWith; applyWith, if
	// set, plays it (else it is Apply). mergeTool, if set, plays the
	// user's merge tool (else there is none).
	applyOpts []sandbox.ApplyOptions
	applyWith func(d review.Decisions, opts sandbox.ApplyOptions) (*sandbox.ApplyResult, error)
	mergeTool func(c *review.ConflictError) ([]byte, error)
	// actions are a sandbox's held actions, by sandbox ID (their verdicts
	// are the saved review's, as the store's are); send, if set, plays
	// sending one (else the upstream answers 201); sentIDs records what
	// SendActions sent, in order.
	actions map[string][]sandbox.ActionView
	send    func(a sandbox.Action) (sandbox.SendRecord, error)
	sentIDs []int
	// commits records each ApplyCommit and Branch (its options: a branch
	// named for Branch); commitErr, if set, fails them as git would;
	// commitMsg is CommitMessage's answer.
	commits   []promote.CommitOptions
	commitErr error
	commitMsg string
}

var _ AppService = (*fakeService)(nil)

func (s *fakeService) CommitMessage(string) (string, error) { return s.commitMsg, nil }

// ApplyCommit applies as ApplyWith does and records the commit; with
// commitErr nothing is written.
func (s *fakeService) ApplyCommit(ctx context.Context, id string, d review.Decisions, opts sandbox.ApplyOptions, copts promote.CommitOptions) (*sandbox.ApplyResult, *promote.CommitResult, error) {
	s.mu.Lock()
	s.commits = append(s.commits, copts)
	err := s.commitErr
	s.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	res, err := s.ApplyWith(ctx, id, d, opts)
	if err != nil || res.Held {
		return res, nil, err
	}
	cr := &promote.CommitResult{Promotion: sandbox.Promotion{Commit: "c0ffee1234567890", Branch: "main"}, Message: promote.Message{Subject: firstLine(copts.Message)}}
	s.promote(id, cr.Promotion)
	return res, cr, nil
}

// Branch records the commit on a new branch; nothing is applied.
func (s *fakeService) Branch(_ context.Context, id string, d review.Decisions, copts promote.CommitOptions) (*promote.CommitResult, error) {
	s.mu.Lock()
	s.commits = append(s.commits, copts)
	err := s.commitErr
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	cr := &promote.CommitResult{Promotion: sandbox.Promotion{Commit: "beef001234567890", Parent: "abc", Branch: copts.Branch, NewBranch: true}, Message: promote.Message{Subject: firstLine(copts.Message)}}
	s.promote(id, cr.Promotion)
	return cr, nil
}

// promote records a sandbox's commit, as the store does.
func (s *fakeService) promote(id string, p sandbox.Promotion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.infos {
		if s.infos[i].ID == id {
			s.infos[i].Promotion = &p
			s.infos[i].Stage = sandbox.StageCommitted
		}
	}
}

// Actions are the sandbox's held actions with the saved review's
// verdicts and how their sending stands, as sandbox.ActionViews gives
// them.
func (s *fakeService) Actions(id string) ([]sandbox.ActionView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.saved[id]
	out := slices.Clone(s.actions[id])
	for i := range out {
		out[i].Verdict = d.Actions[out[i].ID]
		if out[i].Send != nil {
			rec := *out[i].Send
			out[i].Send = &rec
		}
	}
	return out, nil
}

// SendActions sends the saved review's approved actions as
// sandbox.SendActions does: in order, each at most once (one sent or
// possibly sent before is reported as it stands), stopping at the first
// that fails.
func (s *fakeService) SendActions(ctx context.Context, id string, report func(sandbox.ActionResult)) ([]sandbox.ActionResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	approved := sandbox.Approved(s.saved[id])
	var out []sandbox.ActionResult
	for _, n := range approved {
		i := slices.IndexFunc(s.actions[id], func(v sandbox.ActionView) bool { return v.ID == n })
		if i < 0 {
			return out, fmt.Errorf("%s has no action %d", id, n)
		}
		v := &s.actions[id][i]
		res := sandbox.ActionResult{ID: n, Method: v.Method, URL: v.URL()}
		if prev := v.Send; prev != nil && prev.State != sandbox.NotSent {
			res.State, res.Already, res.Status, res.Body, res.Error = prev.State, true, prev.Status, prev.Body, prev.Error
			out = append(out, res)
			if report != nil {
				report(res)
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		rec := sandbox.SendRecord{State: sandbox.Sent, Status: 201, Body: []byte(`{"id":1}`)}
		var err error
		if s.send != nil {
			rec, err = s.send(v.Action)
			if err != nil {
				rec.Error = err.Error()
			}
		}
		v.Send = &rec
		s.sentIDs = append(s.sentIDs, n)
		res.State, res.Status, res.Body, res.Error = rec.State, rec.Status, rec.Body, rec.Error
		out = append(out, res)
		if report != nil {
			report(res)
		}
		if err != nil {
			break
		}
	}
	return out, nil
}

// sent is what SendActions sent, in order.
func (s *fakeService) sent() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sentIDs)
}

func (s *fakeService) Discard(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.discarded = append(s.discarded, id)
	s.infos = slices.DeleteFunc(s.infos, func(in sandbox.Info) bool { return in.ID == id })
	return nil
}

func (s *fakeService) RunSetup(string) (RunSetup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.setup != nil {
		return *s.setup, nil
	}
	return RunSetup{Limits: config.DefaultLimits(), Images: s.built}, nil
}

func (s *fakeService) CheckImage(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.built == nil || slices.Contains(s.built, name) {
		return nil
	}
	return fmt.Errorf("load image %s: %w", name, image.ErrNotFound)
}

func (s *fakeService) ApplyWith(ctx context.Context, id string, d review.Decisions, opts sandbox.ApplyOptions) (*sandbox.ApplyResult, error) {
	s.mu.Lock()
	s.applyOpts = append(s.applyOpts, opts)
	play := s.applyWith
	s.mu.Unlock()
	if play == nil {
		return s.Apply(ctx, id, d)
	}
	s.mu.Lock()
	s.applied = append(s.applied, d)
	s.mu.Unlock()
	return play(d, opts)
}

func (s *fakeService) MergeTool(_ context.Context, _ string, c *review.ConflictError) ([]byte, error) {
	if s.mergeTool == nil {
		return nil, promote.ErrNoMergeTool
	}
	return s.mergeTool(c)
}

func (s *fakeService) Reply(ctx context.Context, req ReplyRequest) (*pipeline.RunResult, error) {
	if s.reply != nil {
		return s.reply(ctx, req)
	}
	id, message := req.ID, req.Message
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, id+": "+message)
	for i := range s.infos {
		if s.infos[i].ID == id {
			s.infos[i].Round = 2
		}
	}
	return &pipeline.RunResult{Meta: sandbox.Meta{ID: id, Round: 2, Status: sandbox.StatusReady}}, nil
}

func (s *fakeService) RoundChangeset(_ context.Context, id string, n int) (*review.Changeset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, ok := s.rounds[id]
	if !ok {
		return nil, fmt.Errorf("sandbox %s has no round %d", id, n)
	}
	return cs, nil
}

func (s *fakeService) Staleness(context.Context, string) (sandbox.Staleness, error) {
	return s.stale, nil
}

// Compare is the store's Compare over the fake's infos: a group ID
// stands for its attempts.
func (s *fakeService) Compare(ids []string) ([]sandbox.Comparison, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sandbox.Comparison
	for _, id := range ids {
		for _, in := range s.infos {
			if in.ID == id || in.Group == id {
				out = append(out, sandbox.Comparison{ID: in.ID, Group: in.Group, Attempt: in.Attempt, Agent: in.Agent, Status: in.Status,
					ExitCode: in.ExitCode, Error: in.Error, Changes: in.Changes, Rationale: fmt.Sprintf("Attempt %d", in.Attempt)})
			}
		}
	}
	return out, nil
}

func (s *fakeService) List() ([]sandbox.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sandbox.Info(nil), s.infos...), nil
}

func (s *fakeService) Run(ctx context.Context, req RunRequest) (*pipeline.RunResult, error) {
	s.mu.Lock()
	s.runs = append(s.runs, req)
	run := s.run
	s.mu.Unlock()
	if run == nil {
		return nil, fmt.Errorf("no run")
	}
	return run(ctx, req)
}

func (s *fakeService) Changeset(_ context.Context, id string) (*review.Changeset, error) {
	cs, ok := s.changesets[id]
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotReady)
	}
	return cs, nil
}

func (s *fakeService) Apply(_ context.Context, id string, d review.Decisions) (*sandbox.ApplyResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = append(s.applied, d)
	s.setStatus(id, sandbox.StatusApplied)
	if s.applyRes != nil {
		return s.applyRes, nil
	}
	return &sandbox.ApplyResult{Result: &review.Result{}}, nil
}

func (s *fakeService) Undo(_ context.Context, id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.undos++
	s.setStatus(id, sandbox.StatusReady)
	return "/x/applies/001", nil
}

// setStatus sets a sandbox's status, as Apply and Undo do in the store
// (s.mu held).
func (s *fakeService) setStatus(id string, st sandbox.Status) {
	for i := range s.infos {
		if s.infos[i].ID == id {
			s.infos[i].Status = st
		}
	}
}

func (s *fakeService) Summary(string) (string, error)    { return s.summary, nil }
func (s *fakeService) Transcript(string) ([]byte, error) { return []byte(s.transcript), nil }
func (s *fakeService) VerifyLog(string) ([]byte, error) {
	if s.verifyLog == "" {
		return nil, nil
	}
	return []byte(s.verifyLog), nil
}

func (s *fakeService) appliedDecisions() []review.Decisions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]review.Decisions(nil), s.applied...)
}

// testObjects holds the contents of a test changeset's files by hash.
type testObjects map[string][]byte

// entry keeps content and returns the manifest entry of a file p with it.
func (o testObjects) entry(p, content string) *manifest.Entry {
	sum := sha256.Sum256([]byte(content))
	h := hex.EncodeToString(sum[:])
	o[h] = []byte(content)
	return &manifest.Entry{Path: p, Type: manifest.File, Mode: 0o644, Size: int64(len(content)), SHA256: h}
}

// changeset is the changeset of changes, their contents read from o.
func (o testObjects) changeset(t testing.TB, changes []manifest.Change) *review.Changeset {
	t.Helper()
	cs, err := review.New(context.Background(), changes, func(sum string) ([]byte, error) {
		if b, ok := o[sum]; ok {
			return b, nil
		}
		return nil, fmt.Errorf("no object %s", sum)
	}, review.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// testChangeset is a changeset with every kind of change: a file with
// three hunks, an added file, a deletion, a rename, a mode change and a
// binary file, in two folders.
func testChangeset(t testing.TB) *review.Changeset {
	t.Helper()
	objs := testObjects{}
	entry := objs.entry
	lines := func(n int, change map[int]string) string {
		s := ""
		for i := 1; i <= n; i++ {
			if c, ok := change[i]; ok {
				s += c + "\n"
				continue
			}
			s += fmt.Sprintf("line %d\n", i)
		}
		return s
	}
	oldMain := lines(40, nil)
	newMain := lines(40, map[int]string{2: "line two", 20: "line twenty", 38: "line 38 changed"})
	exe := entry("scripts/run.sh", "#!/bin/sh\necho run\n")
	exeNew := *exe
	exeNew.Mode = 0o755
	changes := []manifest.Change{
		{Kind: manifest.Modified, Path: "src/main.go", Old: entry("src/main.go", oldMain), New: entry("src/main.go", newMain)},
		{Kind: manifest.Added, Path: "src/new.go", New: entry("src/new.go", "package src\n\nfunc New() {}\n")},
		{Kind: manifest.Deleted, Path: "old.txt", Old: entry("old.txt", "gone\n")},
		{Kind: manifest.Renamed, Path: "docs/guide.md", OldPath: "guide.md", Old: entry("guide.md", "# Guide\n"), New: entry("docs/guide.md", "# Guide\n")},
		{Kind: manifest.ModeChanged, Path: "scripts/run.sh", Old: exe, New: &exeNew},
		{Kind: manifest.Modified, Path: "logo.png", Old: entry("logo.png", "\x89PNG\x00\x01"), New: entry("logo.png", "\x89PNG\x00\x02\x03")},
	}
	cs := objs.changeset(t, changes)
	return cs
}

// githubComment is a held request of round 1 that comments on issue
// #12 of org/repo with text, as an agent's gh issue comment makes it.
func githubComment(id int, text string) sandbox.ActionView {
	return sandbox.ActionView{Action: sandbox.Action{ID: id, Round: 1, Held: egress.Held{
		Time: time.Date(2026, 11, 23, 9, 3, 0, 0, time.UTC), Scheme: "https", Host: "api.github.com", Port: 443,
		Method: "POST", Path: "/repos/org/repo/issues/12/comments",
		Header:  http.Header{"Accept": {"application/vnd.github+json"}, "Content-Type": {"application/json"}, "User-Agent": {"gh/2.62.0"}},
		Body:    []byte(fmt.Sprintf(`{"body":%q}`, text)),
		Secret:  &egress.HeldSecret{Name: "GITHUB_TOKEN", Header: "Authorization", Parts: []string{"token ", ""}},
		Dropped: []string{"Cookie"},
		Rule:    "api.github.com",
	}}}
}

// testInfo is a sandbox ready for review.
func testInfo(id string) sandbox.Info {
	code := 0
	created := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	return sandbox.Info{Meta: sandbox.Meta{
		ID: id, Created: created, Project: "/home/dev/src/wordfreq", Command: nil, ScriptName: "demo-agent.sh",
		Status: sandbox.StatusReady, ExitCode: &code,
		Changes: &sandbox.ChangeStats{Files: 6, Added: 1, Modified: 2, Deleted: 1, Renamed: 1, ModeChanged: 1, LinesAdded: 6, LinesRemoved: 3},
		Timings: sandbox.Timings{TotalMS: 12_400},
	}}
}

func (s *fakeService) Decisions(id string) (review.Decisions, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved[id], nil
}

func (s *fakeService) SaveDecisions(id string, d review.Decisions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saved == nil {
		s.saved = map[string]review.Decisions{}
	}
	s.saved[id] = d
	return nil
}

func (s *fakeService) RoundLog(id string, n int) (sandbox.RoundLog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	logs := s.roundLogs[id]
	if n < 1 || n > len(logs) {
		return sandbox.RoundLog{}, fmt.Errorf("sandbox %s has no round %d", id, n)
	}
	return logs[n-1], nil
}
