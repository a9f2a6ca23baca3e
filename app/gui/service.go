package gui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/agent"
	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/vm/image"
)

// The windows' services: each window is given the small interface of
// what it calls, and the review window's panes each use a part of
// ReviewService. StoreService implements all of them over app/sandbox;
// tests use an in-memory fake.

// AppService is what the app is opened on: the main window's service and
// those of the windows it opens (reviews, comparisons).
type AppService interface {
	MainService
	ReviewService
	CompareService
}

// MainService is what the main window calls itself: the sandbox list,
// runs and their dialog, discarding and transcripts.
type MainService interface {
	// List returns every sandbox, newest first.
	List() ([]sandbox.Info, error)
	// Run starts a run and returns when it ends (ready, failed or
	// stopped through ctx). Progress and output arrive on req's callbacks
	// from the run's goroutine.
	Run(ctx context.Context, req RunRequest) (*pipeline.RunResult, error)
	// Discard removes a sandbox as airlock rm does: its changes are
	// discarded (what was applied stays applied). A sandbox a process
	// still runs is refused.
	Discard(id string) error
	// Transcript is what the command printed.
	Transcript(id string) ([]byte, error)
	// RunSetup is what the run dialog offers for project: the limits a
	// run gets unless the dialog changes them, and the images built here.
	RunSetup(project string) (RunSetup, error)
	// CheckImage says why image name cannot boot here, and what to do,
	// or nil.
	CheckImage(name string) error
}

// CompareService is what the compare window needs.
type CompareService interface {
	// Compare describes sandboxes side by side; a fan-out's group ID
	// stands for all its attempts.
	Compare(ids []string) ([]sandbox.Comparison, error)
}

// ReviewService is what the review window needs: what it reads when it
// opens, and the parts its panes call.
type ReviewService interface {
	// Changeset is the changes of a sandbox, for review.
	Changeset(ctx context.Context, id string) (*review.Changeset, error)
	// Summary is the agent's .airlock/summary.md ("" if none); Transcript
	// is what the command printed.
	Summary(id string) (string, error)
	Transcript(id string) ([]byte, error)
	// Decisions is the review in progress (verdicts and comments) kept
	// with the sandbox.
	Decisions(id string) (review.Decisions, error)
	// Staleness is how far the real project has moved on since the
	// sandbox's baseline.
	Staleness(ctx context.Context, id string) (sandbox.Staleness, error)
	// VerifyLog is what the sandbox's verify command printed (nil when
	// none ran).
	VerifyLog(id string) ([]byte, error)
	// List is read again for the header after an apply, an undo or a
	// round.
	List() ([]sandbox.Info, error)
	DecisionSaver
	RoundService
	PromoteService
	ActionService
}

// DecisionSaver keeps the review in progress with the sandbox.
type DecisionSaver interface {
	// SaveDecisions keeps the verdicts and comments with the sandbox.
	SaveDecisions(id string, d review.Decisions) error
}

// RoundService is what Send back and the rounds need: a reply round, and
// what each round changed and printed.
type RoundService interface {
	// Reply sends a reviewed sandbox back to its agent with req's message
	// (its saved comments not sent yet and its rejected hunks go too) and
	// returns when the next round is collected. The round's output and
	// progress arrive on req's callbacks from its goroutine.
	Reply(ctx context.Context, req ReplyRequest) (*pipeline.RunResult, error)
	// RoundChangeset is what round n (2 or more) of a sandbox changed
	// over the round before it.
	RoundChangeset(ctx context.Context, id string, n int) (*review.Changeset, error)
	// RoundLog is round n (1 to the sandbox's round) as it ran: the
	// prompt that started it and what its command printed.
	RoundLog(id string, n int) (sandbox.RoundLog, error)
}

// PromoteService is what the review's Apply, its menu and Undo need:
// applying (and the conflict window's resolutions), committing, a new
// branch, undoing.
type PromoteService interface {
	ConflictService
	// Undo reverts the sandbox's last apply and returns its journal.
	Undo(ctx context.Context, id string) (string, error)
	// CommitMessage is the message a commit of the sandbox's changes gets
	// unless the user writes another (airlock apply --commit's): the
	// agent's summary, its subject on the first line. Airlock's trailers
	// are added to any message and are not part of it.
	CommitMessage(id string) (string, error)
	// ApplyCommit is ApplyWith, then one git commit of exactly the files
	// written, on the current branch (airlock apply --commit): nothing is
	// written when the project is not in a git repository or its index
	// holds staged changes. The commit is nil when nothing was written.
	ApplyCommit(ctx context.Context, id string, d review.Decisions, opts sandbox.ApplyOptions, copts promote.CommitOptions) (*sandbox.ApplyResult, *promote.CommitResult, error)
	// Branch commits what d approves on the new branch copts.Branch from
	// the baseline's commit, leaving the working tree and the index alone
	// (airlock apply --branch); an existing branch is refused.
	Branch(ctx context.Context, id string, d review.Decisions, copts promote.CommitOptions) (*promote.CommitResult, error)
}

// ConflictService is what the conflict window needs.
type ConflictService interface {
	// ApplyWith writes what d approves into the sandbox's project, with
	// options: all or nothing, and the user's resolutions of files in
	// conflict (written in the apply's journal).
	ApplyWith(ctx context.Context, id string, d review.Decisions, opts sandbox.ApplyOptions) (*sandbox.ApplyResult, error)
	// MergeTool runs the user's merge tool on a file in conflict and
	// returns its result, not written (promote.ErrNoMergeTool when none
	// is set).
	MergeTool(ctx context.Context, id string, c *review.ConflictError) ([]byte, error)
}

// ActionService is what the review's staged actions need.
type ActionService interface {
	// Actions are the sandbox's staged actions (requests its agent made
	// that a [[network.stage]] entry held) with their saved verdicts and
	// how their sending stands.
	Actions(id string) ([]sandbox.ActionView, error)
	// SendActions sends the approved actions of the saved review that
	// were never sent, from this computer, in their order (at most once
	// each, sandbox.SendActions); report gets each result as it comes.
	SendActions(ctx context.Context, id string, report func(sandbox.ActionResult)) ([]sandbox.ActionResult, error)
}

// RunSetup is what a run on a project gets without choosing, and what
// the run dialog can choose from.
type RunSetup struct {
	// Limits are the user's limits (config.toml, Airlock's defaults for
	// what it leaves out) narrowed by the project's airlock.toml, every
	// field set (config.Unlimited where there is none): airlock run's
	// without flags.
	Limits config.Limits
	// Images are the guest images built here (or shipped with the app),
	// by name.
	Images []string
	// Environment says the project describes its own environment
	// (airlock.toml): a run without an image runs on it.
	Environment bool
}

// ReplyRequest is a Send back round: the sandbox, the message, and the
// terminal the round's command runs in.
type ReplyRequest struct {
	ID      string
	Message string
	// Output receives the terminal's output; Input carries what the user
	// types; TTY is the terminal's size and resizes.
	Output io.Writer
	Input  io.Reader
	TTY    *client.TTY
	// Progress receives the round's events.
	Progress func(pipeline.Progress)
}

// Preset is a way to start an agent, offered in the run dialog. Exactly
// one of Agent, Script and Command is set, or none when the user types the
// command (Custom).
type Preset struct {
	Name string
	// Agent names an agent preset (app/agent): its command runs on the
	// prompt, or its interactive command when there is none.
	Agent string
	// Template is the agent preset's command, as shown in the dialog.
	Template []string
	// Script is the path of a POSIX shell script run with sh in the VM.
	Script string
	// Command is the argv run in /workspace; the prompt, if any, is
	// appended as its last argument.
	Command []string
	// Custom means the user types the command line in the dialog.
	Custom bool
	// Unavailable, if set, says why the preset cannot be used here; the
	// dialog shows it and refuses to start.
	Unavailable string
	// SignIn, if set, says whether the agent can sign in here (its
	// credentials looked up on the host when the dialog shows it); the
	// dialog shows it and refuses to start an agent that cannot.
	SignIn func() (plan.Credentials, error)
}

// Title is the preset's name in lists: Name without its note in
// parentheses ("Demo agent (no API key)" is the Demo agent).
func (p Preset) Title() string {
	if i := strings.Index(p.Name, " ("); i > 0 {
		return p.Name[:i]
	}
	return p.Name
}

// Presets are the run dialog's choices: the demo agent preset first (a
// stand-in with a fake model: no API key), the other agent presets
// (claude, codex, gemini and the user's) by name, the demo script
// demoScript ("" when it cannot be found), and a command of the user's.
// signIn, if set, tells whether an agent can sign in (Planner.Credentials).
func Presets(demoScript string, agents map[string]agent.Preset, signIn func(agent string) (plan.Credentials, error)) []Preset {
	var out []Preset
	names := agent.Names(agents)
	if i := slices.Index(names, demoAgent); i > 0 {
		names = append(append([]string{demoAgent}, names[:i]...), names[i+1:]...)
	}
	for _, n := range names {
		p := agents[n]
		title := p.Description
		if title == "" {
			title = n
		}
		if n == demoAgent {
			title = "Demo agent (no API key)"
		}
		pr := Preset{Name: title, Agent: n, Template: p.CommandTemplate}
		if signIn != nil {
			pr.SignIn = func() (plan.Credentials, error) { return signIn(n) }
		}
		out = append(out, pr)
	}
	demo := Preset{Name: "Demo script (no API key)", Script: demoScript}
	if demoScript == "" {
		demo.Unavailable = "examples/demo-agent.sh was not found beside airlock or in the working directory"
	}
	return append(out, demo, Preset{Name: "Command…", Custom: true})
}

// demoAgent is the agent preset that needs no API key.
const demoAgent = "demo"

// RunRequest is what the run dialog asks for.
type RunRequest struct {
	Project string
	// Command is the argv; with Script, the script's arguments.
	Command []string
	// Script and ScriptName, when set, are a shell script run with sh.
	Script     []byte
	ScriptName string
	// Prompt is given to the agent as AIRLOCK_PROMPT; with Agent it is
	// the agent preset's task.
	Prompt string
	// Agent names the agent preset to run (Command is then built from it);
	// AgentName is its name for people (the preset's description).
	Agent     string
	AgentName string
	Image     string
	// CPUs, MemoryMiB and Timeout are limits; zero means the user's
	// configured ones (Airlock's defaults), as for airlock run, and a
	// negative Timeout no time limit.
	CPUs      int
	MemoryMiB int
	Timeout   time.Duration
	// Output receives the terminal's output; Input carries what the user
	// types; TTY is the terminal's size and resizes.
	Output io.Writer
	Input  io.Reader
	TTY    *client.TTY
	// Progress receives the run's events.
	Progress func(pipeline.Progress)
}

// StoreService is every window's service over a sandbox store: every
// method is one call into app/sandbox, and every run and reply round is planned by
// Planner exactly as airlock run and airlock reply plan theirs.
type StoreService struct {
	Store   *sandbox.Store
	Planner *plan.Planner
	// OnPlan, if set, sees each plan before its run starts; its error
	// stops the run.
	OnPlan func(*plan.Plan) error
}

var (
	_ AppService      = (*StoreService)(nil)
	_ MainService     = (*StoreService)(nil)
	_ CompareService  = (*StoreService)(nil)
	_ ReviewService   = (*StoreService)(nil)
	_ RoundService    = (*StoreService)(nil)
	_ PromoteService  = (*StoreService)(nil)
	_ ActionService   = (*StoreService)(nil)
	_ ConflictService = (*StoreService)(nil)
	_ DecisionSaver   = (*StoreService)(nil)
)

func (s *StoreService) List() ([]sandbox.Info, error) { return s.Store.List() }

// Request is what the planner is asked for a run of the dialog's req.
func (req RunRequest) Request() plan.Request {
	r := plan.Request{
		Project: req.Project, Prompt: req.Prompt, Command: req.Command, Script: req.Script, ScriptName: req.ScriptName, Image: req.Image,
		Limits: config.Limits{CPUs: req.CPUs, Memory: config.Size(req.MemoryMiB) * config.MiB, Timeout: config.Duration(req.Timeout)},
	}
	if req.Timeout < 0 {
		r.Limits.Timeout = config.Unlimited
	}
	if req.Agent != "" {
		r.Agents = []string{req.Agent}
	}
	return r
}

func (s *StoreService) Run(ctx context.Context, req RunRequest) (*pipeline.RunResult, error) {
	r := req.Request()
	if req.Progress != nil {
		// A project's environment is built while the run is planned:
		// the run view shows it as the image step.
		r.Progress = func(msg string) { req.Progress(pipeline.Progress{Step: pipeline.StepImage, Message: msg}) }
	}
	p, err := s.plan(ctx, r)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return s.execute(ctx, p, req.Input, req.Output, req.TTY, req.Progress)
}

// execute carries out p's one run (or reply round) in a terminal: its
// input, its output and progress.
func (s *StoreService) execute(ctx context.Context, p *plan.Plan, in io.Reader, out io.Writer, tty *client.TTY, progress func(pipeline.Progress)) (*pipeline.RunResult, error) {
	if len(p.Runs) != 1 {
		return nil, fmt.Errorf("the app runs one attempt at a time; this plan has %d", len(p.Runs))
	}
	o := &p.Runs[0]
	o.Stdin, o.Stdout, o.Stderr, o.TTY, o.Progress = in, out, out, tty, progress
	done, err := pipeline.Execute(ctx, s.Store, p.Job)
	return done.Result(), appError(err)
}

// plan plans r and shows the plan to OnPlan.
func (s *StoreService) plan(ctx context.Context, r plan.Request) (*plan.Plan, error) {
	if s.Planner == nil {
		return nil, plan.ErrNoBackend
	}
	p, err := s.Planner.Run(ctx, r)
	if err != nil {
		return nil, appError(err)
	}
	if s.OnPlan != nil {
		if err := s.OnPlan(p); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

// appError says what to do about an error of planning in the app's
// words.
func appError(err error) error {
	var untrusted *plan.UntrustedError
	var untrustedEnv *images.UntrustedEnvironmentError
	switch {
	case err == nil:
	case errors.As(err, &untrusted), errors.As(err, &untrustedEnv):
		return fmt.Errorf("%w\n(run airlock trust in a terminal, then start the run again)", err)
	case errors.Is(err, sandbox.ErrRunning):
		return fmt.Errorf("%w: press Stop in its run window first", err)
	case errors.Is(err, pipeline.ErrNoUser):
		return fmt.Errorf("%w: choose the full image, whose user is agent", err)
	}
	return err
}

func (s *StoreService) sandbox(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return nil, err
	}
	if _, err := sb.Recover(ctx); err != nil {
		return nil, err
	}
	return sb, nil
}

func (s *StoreService) Changeset(ctx context.Context, id string) (*review.Changeset, error) {
	sb, err := s.sandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return sb.Changeset(ctx)
}

func (s *StoreService) ApplyWith(ctx context.Context, id string, d review.Decisions, opts sandbox.ApplyOptions) (*sandbox.ApplyResult, error) {
	sb, err := s.sandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	res, err := sb.ApplyWith(ctx, d, opts)
	return res, appError(err)
}

func (s *StoreService) MergeTool(ctx context.Context, id string, c *review.ConflictError) ([]byte, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return nil, err
	}
	return promote.MergeTool(ctx, sb, c)
}

func (s *StoreService) Actions(id string) ([]sandbox.ActionView, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return nil, err
	}
	d, err := sb.Decisions(context.Background())
	if err != nil {
		return nil, err
	}
	return sb.ActionViews(d)
}

func (s *StoreService) SendActions(ctx context.Context, id string, report func(sandbox.ActionResult)) ([]sandbox.ActionResult, error) {
	if s.Planner == nil {
		return nil, errors.New("this app has no planner to send actions with")
	}
	sb, err := s.Store.Get(id)
	if err != nil {
		return nil, err
	}
	d, err := sb.Decisions(ctx)
	if err != nil {
		return nil, err
	}
	send, err := s.Planner.Sender()
	if err != nil {
		return nil, err
	}
	return sb.SendActions(ctx, sandbox.Approved(d), send, report)
}

func (s *StoreService) VerifyLog(id string) ([]byte, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return nil, err
	}
	return sb.VerifyLog()
}

func (s *StoreService) CommitMessage(id string) (string, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return "", err
	}
	m, err := sb.Meta()
	if err != nil {
		return "", err
	}
	msg, err := promote.CommitMessage(sb, m, "")
	if err != nil {
		return "", err
	}
	if msg.Body == "" {
		return msg.Subject, nil
	}
	return msg.Subject + "\n\n" + msg.Body, nil
}

func (s *StoreService) ApplyCommit(ctx context.Context, id string, d review.Decisions, opts sandbox.ApplyOptions, copts promote.CommitOptions) (*sandbox.ApplyResult, *promote.CommitResult, error) {
	sb, err := s.sandbox(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	res, cr, err := promote.ApplyCommit(ctx, sb, d, opts, copts)
	return res, cr, appError(err)
}

func (s *StoreService) Branch(ctx context.Context, id string, d review.Decisions, copts promote.CommitOptions) (*promote.CommitResult, error) {
	sb, err := s.sandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	cr, err := promote.Branch(ctx, sb, d, copts)
	return cr, appError(err)
}

func (s *StoreService) Undo(ctx context.Context, id string) (string, error) {
	sb, err := s.sandbox(ctx, id)
	if err != nil {
		return "", err
	}
	journal, err := sb.Undo(ctx)
	return journal, appError(err)
}

func (s *StoreService) Decisions(id string) (review.Decisions, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return review.Decisions{}, err
	}
	return sb.Decisions(context.Background())
}

func (s *StoreService) SaveDecisions(id string, d review.Decisions) error {
	sb, err := s.Store.Get(id)
	if err != nil {
		return err
	}
	return sb.SaveDecisions(d)
}

func (s *StoreService) Summary(id string) (string, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return "", err
	}
	summary, err := sb.Summary()
	if err != nil || summary != "" {
		return summary, err
	}
	final, err := sb.FinalMessage()
	if err != nil || final == "" {
		return "", err
	}
	return "*The agent wrote no summary; its final message:*\n\n" + final, nil
}

func (s *StoreService) Staleness(ctx context.Context, id string) (sandbox.Staleness, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return sandbox.Staleness{}, err
	}
	return sb.Staleness(ctx)
}

// Reply plans the next round of sandbox req.ID as airlock reply does
// (the same limits, network and agent preset) and runs it in req's
// terminal; ctx stops it.
func (s *StoreService) Reply(ctx context.Context, req ReplyRequest) (*pipeline.RunResult, error) {
	p, err := s.plan(ctx, plan.Request{Reply: req.ID, Message: req.Message})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return s.execute(ctx, p, req.Input, req.Output, req.TTY, req.Progress)
}

func (s *StoreService) RoundLog(id string, n int) (sandbox.RoundLog, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return sandbox.RoundLog{}, err
	}
	return sb.RoundLog(n)
}

func (s *StoreService) RoundChangeset(ctx context.Context, id string, n int) (*review.Changeset, error) {
	sb, err := s.sandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return sb.RoundChangeset(ctx, n)
}

func (s *StoreService) Compare(ids []string) ([]sandbox.Comparison, error) {
	return s.Store.Compare(ids)
}

func (s *StoreService) Transcript(id string) ([]byte, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return nil, err
	}
	return sb.Transcript()
}

func (s *StoreService) Discard(id string) error { return appError(s.Store.Remove(id, false)) }

func (s *StoreService) RunSetup(project string) (RunSetup, error) {
	var rs RunSetup
	if s.Planner == nil {
		return rs, plan.ErrNoBackend
	}
	eff, err := s.Planner.Limits(project, config.Limits{})
	if err != nil {
		return rs, err
	}
	rs.Limits = eff.Limits
	ims, err := image.ListAll(append([]string{s.Planner.Home}, s.Planner.ImageRoots...))
	if err != nil {
		return rs, err
	}
	arch := s.Planner.Arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	for _, im := range ims {
		if string(im.Arch) == arch && !slices.Contains(rs.Images, im.Name) {
			rs.Images = append(rs.Images, im.Name)
		}
	}
	env, err := envspec.Find(project)
	rs.Environment = err == nil && env != nil
	return rs, nil
}

func (s *StoreService) CheckImage(name string) error {
	if s.Planner == nil {
		return plan.ErrNoBackend
	}
	return s.Planner.CheckImage(name, "")
}

// Home is the Airlock home the store is in, where the app keeps its
// choices.
func (s *StoreService) Home() string { return filepath.Dir(s.Store.Dir()) }

// CheckProject says whether path can be a run's project: an existing,
// readable directory. Its errors are for people.
func CheckProject(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s cannot be opened: %w", path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is a file, not a folder: drop the project's folder to run an agent on it", filepath.Base(path))
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("the folder %s cannot be read (%w): Airlock needs to read the project to copy it", path, errors.Unwrap(err))
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("the folder %s cannot be read (%w): Airlock needs to read the project to copy it", path, err)
	}
	return nil
}
