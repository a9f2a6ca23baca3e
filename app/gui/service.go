package gui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

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
// one of Script and Command is set, or neither when the user types the
// command (Custom).
type Preset struct {
	Name string
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

// Presets are the run dialog's choices: the demo agent, whose script is
// demoScript ("" when it cannot be found), and a command of the user's.
// Real agents' presets are added here when they come.
func Presets(demoScript string) []Preset {
	demo := Preset{Name: "Demo agent (no API key)", Script: demoScript}
	if demoScript == "" {
		demo.Unavailable = "examples/demo-agent.sh was not found beside airlock or in the working directory"
	}
	return []Preset{demo, {Name: "Command…", Custom: true}}
}

// RunRequest is what the run dialog asks for.
type RunRequest struct {
	Project string
	// Command is the argv; with Script, the script's arguments.
	Command []string
	// Script and ScriptName, when set, are a shell script run with sh.
	Script     []byte
	ScriptName string
	// Prompt is given to the agent as AIRLOCK_PROMPT.
	Prompt string
	Image  string
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
	// the project; nil runs without any.
	Network func(project string) (*sandbox.Network, error)
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
	if s.Network != nil {
		n, err := s.Network(req.Project)
		if err != nil {
			return nil, err
		}
		opts.Network = n
	}
	return s.Store.Run(ctx, opts)
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
	return sb.Summary()
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
	if s.Network != nil {
		if opts.Network, err = s.Network(m.Project); err != nil {
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
