package gui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/app/agent"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/review"
)

// Service is what the windows need from the app. StoreService implements
// it over app/sandbox; tests use an in-memory fake.
type Service interface {
	// List returns every sandbox, newest first.
	List() ([]sandbox.Info, error)
	// Run starts a run and returns when it ends (ready, failed or
	// stopped through ctx). Progress and output arrive on req's callbacks
	// from the run's goroutine.
	Run(ctx context.Context, req RunRequest) (*sandbox.RunResult, error)
	// Changeset is the changes of a sandbox, for review.
	Changeset(ctx context.Context, id string) (*review.Changeset, error)
	// Apply writes what d approves into the sandbox's project.
	Apply(ctx context.Context, id string, d review.Decisions) (*sandbox.ApplyResult, error)
	// Undo reverts the sandbox's last apply and returns its journal.
	Undo(ctx context.Context, id string) (string, error)
	// Decisions and SaveDecisions keep the review in progress (verdicts
	// and comments) with the sandbox.
	Decisions(id string) (review.Decisions, error)
	SaveDecisions(id string, d review.Decisions) error
	// Summary is the agent's .airlock/summary.md ("" if none); Transcript
	// is what the command printed.
	Summary(id string) (string, error)
	Transcript(id string) ([]byte, error)
	// Staleness is how far the real project has moved on since the
	// sandbox's baseline.
	Staleness(ctx context.Context, id string) (sandbox.Staleness, error)
	// Compare describes sandboxes side by side; a fan-out's group ID
	// stands for all its attempts.
	Compare(ids []string) ([]sandbox.Comparison, error)
	// Reply sends a reviewed sandbox back to its agent with message (its
	// saved comments and rejected hunks go too) and returns when the next
	// round is collected.
	Reply(ctx context.Context, id, message string) (*sandbox.RunResult, error)
	// RoundChangeset is what round n (2 or more) of a sandbox changed
	// over the round before it.
	RoundChangeset(ctx context.Context, id string, n int) (*review.Changeset, error)
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
}

// Presets are the run dialog's choices: the demo agent preset first (a
// stand-in with a fake model: no API key), the other agent presets
// (claude, codex, gemini and the user's) by name, the demo script
// demoScript ("" when it cannot be found), and a command of the user's.
func Presets(demoScript string, agents map[string]agent.Preset) []Preset {
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
		out = append(out, Preset{Name: title, Agent: n, Template: p.CommandTemplate})
	}
	demo := Preset{Name: "Demo script (no API key)", Script: demoScript}
	if demoScript == "" {
		demo.Unavailable = "examples/demo-agent.sh was not found beside airlock or in the working directory"
	}
	return append(out, demo, Preset{Name: "Command…", Custom: true})
}

// demoAgent is the agent preset that needs no API key.
const demoAgent = "demo"

// AgentFunc makes an agent preset ready for one run: the preset as the
// run uses it (the demo agent's fake model started, its address allowed
// and in the environment) and what to call when the run is over.
type AgentFunc func(name string) (agent.Preset, func(), error)

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
	// Agent names the agent preset to run (Command is then built from it).
	Agent string
	Image string
	// CPUs, MemoryMiB and Timeout are limits; zero means the defaults
	// (no time limit).
	CPUs      int
	MemoryMiB int
	Timeout   time.Duration
	// Output receives the terminal's output; Input carries what the user
	// types; TTY is the terminal's size and resizes.
	Output io.Writer
	Input  io.Reader
	TTY    *client.TTY
	// Progress receives the run's events.
	Progress func(sandbox.Progress)
}

// BootFunc returns how to boot a machine for a run with these limits and
// image: the per-OS backend choice lives with the caller (the CLI).
type BootFunc func(image string, cpus, memoryMiB int) func(ctx context.Context, a sandbox.Attach) (sandbox.Machine, error)

// StoreService is the Service over a sandbox store: every method is one
// call into app/sandbox.
type StoreService struct {
	Store *sandbox.Store
	Boot  BootFunc
	// Arch is recorded in sandbox.json.
	Arch string
	// Network, if set, gives each run its network (the egress proxy) for
	// the project and the agent preset, if any (its hosts and API key);
	// nil runs without any.
	Network func(project string, agent *agent.Preset) (*sandbox.Network, error)
	// Agent readies an agent preset for a run; nil offers none.
	Agent AgentFunc
	// CheckImage, if set, says why an image cannot boot (not built):
	// the run then stops before a sandbox is made.
	CheckImage func(name string) error
}

var _ Service = (*StoreService)(nil)

func (s *StoreService) List() ([]sandbox.Info, error) { return s.Store.List() }

func (s *StoreService) Run(ctx context.Context, req RunRequest) (*sandbox.RunResult, error) {
	if s.Boot == nil {
		return nil, errors.New("run: this build cannot boot machines")
	}
	image := req.Image
	if image == "" {
		image = "minimal"
	}
	opts := sandbox.RunOptions{
		Project: req.Project, Command: req.Command, Script: req.Script, ScriptName: req.ScriptName,
		Image: image, Arch: s.Arch, Timeout: req.Timeout,
		Boot:  s.Boot(image, req.CPUs, req.MemoryMiB),
		Stdin: req.Input, Stdout: req.Output, Stderr: req.Output, TTY: req.TTY,
		Progress: req.Progress,
	}
	if req.Prompt != "" {
		opts.Env = map[string]string{"AIRLOCK_PROMPT": req.Prompt}
	}
	var p *agent.Preset
	if req.Agent != "" {
		ap, done, err := s.agent(req.Agent)
		if err != nil {
			return nil, err
		}
		defer done()
		p = &ap
		if req.Prompt == "" && len(p.Interactive) == 0 {
			return nil, fmt.Errorf("agent %s has no interactive command: give it a prompt", req.Agent)
		}
		// A prompt runs the agent on that task; no prompt opens its own
		// interactive session on the terminal.
		opts.Command, opts.Agent, opts.User = p.Command(req.Prompt, req.Prompt == ""), req.Agent, p.User
		opts.Env = maps.Clone(p.Env)
		if p.Rationale.JSONField != "" && req.Prompt != "" {
			opts.FinalMessage = p.FinalMessage
		}
	}
	if s.CheckImage != nil {
		opts.Preflight = func() error { return s.CheckImage(image) }
	}
	if s.Network != nil {
		n, err := s.Network(req.Project, p)
		if err != nil {
			return nil, err
		}
		opts.Network = n
	}
	return s.Store.Run(ctx, opts)
}

// agent readies the agent preset name.
func (s *StoreService) agent(name string) (agent.Preset, func(), error) {
	if s.Agent == nil {
		return agent.Preset{}, nil, fmt.Errorf("no agent presets here (agent %s)", name)
	}
	return s.Agent(name)
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

func (s *StoreService) Apply(ctx context.Context, id string, d review.Decisions) (*sandbox.ApplyResult, error) {
	sb, err := s.sandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return sb.Apply(ctx, d)
}

func (s *StoreService) Undo(ctx context.Context, id string) (string, error) {
	sb, err := s.sandbox(ctx, id)
	if err != nil {
		return "", err
	}
	return sb.Undo(ctx)
}

func (s *StoreService) Decisions(id string) (review.Decisions, error) {
	sb, err := s.Store.Get(id)
	if err != nil {
		return review.Decisions{}, err
	}
	return sb.Decisions()
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

func (s *StoreService) Reply(ctx context.Context, id, message string) (*sandbox.RunResult, error) {
	if s.Boot == nil {
		return nil, errors.New("reply: this build cannot boot machines")
	}
	sb, err := s.Store.Get(id)
	if err != nil {
		return nil, err
	}
	m, err := sb.Meta()
	if err != nil {
		return nil, err
	}
	cpus, mem := 0, 0
	if m.Limits != nil {
		cpus, mem = m.Limits.CPUs, int(m.Limits.Memory>>20)
	}
	opts := sandbox.RunOptions{Image: m.Image, Arch: m.Arch, Boot: s.Boot(m.Image, cpus, mem)}
	var p *agent.Preset
	if m.Agent != "" {
		// An agent preset carries on its own conversation with the reply.
		ap, done, err := s.agent(m.Agent)
		if err != nil {
			return nil, err
		}
		defer done()
		p = &ap
		prompt, err := sb.ReplyPrompt(ctx, message)
		if err != nil {
			return nil, err
		}
		opts.Command, opts.Agent, opts.Env, opts.User = p.ContinueCommand(prompt), m.Agent, maps.Clone(p.Env), p.User
		if p.Rationale.JSONField != "" {
			opts.FinalMessage = p.FinalMessage
		}
	}
	if s.Network != nil {
		if opts.Network, err = s.Network(m.Project, p); err != nil {
			return nil, err
		}
	}
	return s.Store.Reply(ctx, id, message, opts)
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
