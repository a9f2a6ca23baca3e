package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"

	"github.com/pkg/sftp"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/objects"
	"github.com/airlock-dev/airlock/sync/transfer"
	"github.com/airlock-dev/airlock/vm/disk"
)

// scriptPath is where a --script is put in the guest: outside /workspace,
// so it is never part of the changeset.
const scriptPath = "/tmp/airlock-script"

// DefaultKillGrace is RunOptions.KillGrace's default.
const DefaultKillGrace = 30 * time.Second

// maxSummary caps the agent's summary that is kept.
const maxSummary = 1 << 20

// Machine is a booted VM as the pipeline uses it: SFTP and Exec carry the
// files (the sync/transfer Remote contract), Run runs the command,
// Shutdown ends it.
type Machine interface {
	SFTP(opts ...sftp.ClientOption) (*sftp.Client, error)
	Exec(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error
	Run(ctx context.Context, cmd client.Command) error
	Shutdown(ctx context.Context) error
}

// Transfer moves the project into a machine and the changes back. Push
// and Pull report files done out of total. Push returns what the machine
// now knows of the tree (the zero Known when it keeps nothing), which
// Manifest is given so that only the changes since need to travel; it
// returns what the machine knows after it.
type Transfer interface {
	Push(ctx context.Context, m Machine, dest string, base *manifest.Manifest, store *objects.Store, progress func(done, total int)) (transfer.Known, error)
	Manifest(ctx context.Context, m Machine, dir string, since transfer.Known, limits manifest.Limits, excludes []string) (transfer.Known, error)
	Pull(ctx context.Context, m Machine, dir string, changes []manifest.Change, store *objects.Store, limits manifest.Limits, progress func(done, total int)) error
}

// Step names a phase of a run, for progress events.
type Step string

const (
	StepImage    Step = "image"    // the image is fetched while the run is planned (pulled or built), before the sandbox exists
	StepCreated  Step = "created"  // the sandbox exists (Progress.Sandbox is its ID)
	StepSnapshot Step = "snapshot" // walking and copying the project
	StepExcluded Step = "excluded" // the snapshot is done; Progress.Excluded lists what was left out
	StepBoot     Step = "boot"
	StepPush     Step = "push" // Done/Total files
	StepRun      Step = "run"  // the command runs; its output streams to RunOptions.Stdout/Stderr
	StepCollect  Step = "collect"
	StepVerify   Step = "verify"
	StepStop     Step = "stop"
	StepReady    Step = "ready" // ready for review
)

// Progress is one progress event of a run.
type Progress struct {
	Step    Step   `json:"step"`
	Sandbox string `json:"sandbox,omitempty"`
	Message string `json:"message,omitempty"`
	// Done and Total count files where a step has them.
	Done  int `json:"done,omitempty"`
	Total int `json:"total,omitempty"`
	// Excluded is set on StepExcluded (what the snapshot left out) and on
	// a StepCollect event that reports what the guest left out.
	Excluded []manifest.Exclusion `json:"excluded,omitempty"`
	// CacheFrom, on StepCreated, is the sandbox whose run left the
	// project's dependency caches this run starts with (Meta.CacheFrom).
	CacheFrom string `json:"cache_from,omitempty"`
}

// RunOptions is one run as the executor receives it: what to run
// (RunSpec, decided by the planner) and how it runs and shows itself
// (Hooks). Their fields are promoted: o.Project, o.Boot.
type RunOptions struct {
	RunSpec
	Hooks
}

// RunSpec is the run's description: plain data, every decision made.
// The planner (app/plan) resolves each field once; the pipeline carries
// them out and decides none of them again: it reads no airlock.toml,
// parses no sync mode and picks no default verify.
type RunSpec struct {
	// Project is the real project directory, absolute. It is only read.
	Project string
	// Command is the argv run in /workspace. With Script, it is the
	// script's arguments.
	Command []string
	// Script, if set, is a POSIX shell script copied into the guest
	// (outside /workspace) and run with sh, Command as its arguments.
	Script []byte
	// ScriptName is the script's file name, for people.
	ScriptName string
	// Image and Arch are recorded in sandbox.json.
	Image, Arch string
	// Origin says what asked for the run when a person did not (an MCP
	// tool call); recorded in sandbox.json and the audit log.
	Origin *sandbox.Origin
	// Sync is how the project reaches the VM: one of sandbox.SyncModes.
	Sync sandbox.SyncMode
	// User runs the command (and the verify step) as that user of the
	// guest, owner of /workspace; empty means the image's default user
	// (the full image's "agent"; root on the minimal image).
	User string
	// Owner is that user's numeric uid and gid on the image (SyncDisk
	// writes the baseline owned by them).
	Owner Owner
	// BaseDisks is the directory of cached baseline disks (SyncDisk).
	BaseDisks string
	// Excludes are the project's own exclusion rules (airlock.toml's
	// exclude), for the snapshot and the collect.
	Excludes []string
	// Env is added to the command's environment.
	Env map[string]string
	// Docker starts the image's Docker Engine in the VM before the
	// command (root daemon, its data on the sandbox's disk, its pulls
	// through the run's network); the image must have one (an
	// environment with docker = true).
	Docker bool
	// Hosts are written to the guest's /etc/hosts (as root) and Start
	// run (as User, in /workspace, with the command's environment, in
	// the agent's jail) before the command of every round: a project
	// environment's runArgs --add-host, postStartCommand and
	// postAttachCommand. A start command that fails stops the run.
	Hosts []sandbox.HostEntry
	// StartGrace is how long a start command is waited on before it is
	// left running beside the command (a server); zero is
	// DefaultStartGrace.
	StartGrace time.Duration
	Start      []sandbox.StartStep
	// Services are the Compose services started under that engine
	// before the command (startServices); nil: none.
	Services *sandbox.Services
	// Cache is the project's cache disk (a path under the home's caches/);
	// the sandbox gets a copy on CacheDir, which becomes the project's
	// next one when the run's verify passes. Empty: no caches.
	Cache string
	// FreshCache starts the run with empty caches instead of the
	// project's (which stay as they are unless this run earns its own
	// place): a result that does not lean on what an earlier run left.
	FreshCache bool
	// Group and Attempt mark one run of a fan-out: the runs of one group
	// start from one baseline, numbered from 1. The command sees
	// AIRLOCK_ATTEMPT (and AIRLOCK_GROUP). The executor sets them.
	Group   string
	Attempt int
	// Verify, if set, is a shell command run in /workspace after the
	// command (the project's airlock.toml verify, or --verify); its
	// output (verify.log) and exit status are part of the review. Empty:
	// no verify step.
	Verify string
	// Agent names the agent preset that made Command, if any (a reply
	// continues the conversation with the same preset).
	Agent string
	// Prompt is the user's task, recorded for people (sandbox.Meta's
	// Prompt); the command or the environment already carries it.
	Prompt string
	// Timeout, if set, kills the command after this long; what it changed
	// until then is still collected, and its exit code is TimeoutExitCode.
	// A guest that does not end the command within KillGrace after that
	// is stopped by the host.
	Timeout time.Duration
	// KillGrace is how long after Timeout the host waits for the command
	// to end before it stops the VM; zero means DefaultKillGrace.
	KillGrace time.Duration
	// DiskSize, if positive, gives the VM a disk of its own of this many
	// bytes for /workspace: a sparse ext4 image in the sandbox directory,
	// which is the workspace's quota, removed once the changes are
	// collected. Zero keeps /workspace in the guest's memory (copy mode).
	DiskSize int64
	// Keep leaves the VM running after a successful run, under its
	// supervisor with its idle TTL, with its workspace disk: airlock exec
	// ID, checkpoint and rollback work on it. The network proxy ends with
	// the run.
	Keep bool
	// OpenNetwork records that Boot gives the machine an unprotected
	// network device: it is written to sandbox.json and the audit log.
	OpenNetwork bool
	// Resources are the limits the machine runs with, recorded in
	// sandbox.json and the audit log.
	Resources *config.Limits
	// Limits cap what comes back from the guest; the zero value takes
	// manifest's defaults.
	Limits manifest.Limits
}

// Owner is a guest user's numeric uid and gid.
type Owner struct{ UID, GID int }

// Hooks are a run's live parts: how its machine boots and its files move
// (the planner's), and its input, output and progress (the caller's).
type Hooks struct {
	// Boot starts the machine of sandbox a.ID; it is called after the
	// snapshot (and, in virtiofs mode, after the staging clone). The
	// machine must share every one of a.Shares into the guest, attach
	// every one of a.Disks, and have each mounted on its Mount before Boot
	// returns.
	Boot func(ctx context.Context, a Attach) (Machine, error)
	// Transfer moves files in copy mode; nil means the default.
	Transfer Transfer
	// Baseline, if set, is the snapshot to start from (taken once with
	// Snapshot for several runs); nil snapshots the project.
	Baseline *Baseline
	// FinalMessage, if set, reads the agent's final message from what the
	// command printed on stdout (up to MaxAgentOutput; nothing is read
	// from more); the message is kept with the sandbox (final.md) and
	// shown as the rationale when the agent wrote no summary.
	FinalMessage func(stdout []byte) (string, bool)
	// Network, if set, gives the guest its only way out: the egress proxy
	// (see Network). Nil leaves the guest without any.
	Network *Network
	// Stdin, if set, is the command's input. Stdout and Stderr receive its
	// output live; nil discards it (the transcript keeps it either way).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TTY, if set, runs the command under a pseudo-terminal of this size
	// (resized through its Resize channel), so interactive agents can be
	// used from a terminal widget; the terminal merges stderr into Stdout.
	TTY *client.TTY
	// Progress receives events from the calling goroutine; nil discards.
	Progress func(Progress)
	// Logger receives diagnostics; nil discards.
	Logger *slog.Logger
	// NoJail runs the command and its verify outside the guest agent's
	// jail: for a test that reads the whole guest (every process's
	// memory, which the jail's Landlock domain keeps from it). Nothing
	// of the CLI or the app sets it.
	NoJail bool
}

// RunResult is what a run produced.
type RunResult struct {
	Sandbox *sandbox.Sandbox
	Meta    sandbox.Meta
	// Report tells what the snapshot left out.
	Report *manifest.Report
	// ExitCode is the command's (128+N for a signal).
	ExitCode int
	// Summary is the agent's .airlock/summary.md, if it wrote one.
	Summary string
	// FinalMessage is the agent's final message, read from its output by
	// RunOptions.FinalMessage ("" if none).
	FinalMessage string
}

// What the transcript (transcript.log) and verify.log keep of one
// command's output: its first TranscriptHead and last TranscriptTail
// bytes, with a marker line between them saying how much was left out, so
// that a guest cannot fill the host's disk through them. The live output
// is not cut.
const (
	TranscriptHead = 32 << 20
	TranscriptTail = 32 << 20
)

// MaxAgentOutput caps the command's stdout kept for its final message.
const MaxAgentOutput = 8 << 20

// runOnce makes a new sandbox from the project and runs the command in it:
// snapshot (walk + content store), boot, push into /workspace, run with
// live output and a transcript, collect (the guest's manifest, diffed
// against the baseline, changed files pulled into the content store), stop.
// The sandbox is then ready for review without the VM.
//
// A command that exits non-zero still has its changes collected; its
// code is in the result. When a step fails, the sandbox is kept, marked
// failed with the reason, and returned with the error.
func runOnce(ctx context.Context, s *sandbox.Store, o RunOptions) (*RunResult, error) {
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	project := o.Project
	r := &runner{s: s, o: o, project: project, progress: o.Progress, log: o.Logger}
	if r.progress == nil {
		r.progress = func(Progress) {}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.o.Transfer == nil {
		r.o.Transfer = DefaultTransfer()
	}
	meta := sandbox.Meta{Project: project, Image: o.Image, Arch: o.Arch, Command: o.Command, SyncMode: o.Sync,
		Network: sandbox.NetworkNone, Limits: o.Resources, Group: o.Group, Attempt: o.Attempt, Agent: o.Agent, Prompt: o.Prompt,
		Docker: o.Docker, Start: o.Start, Hosts: o.Hosts, Services: o.Services, Origin: o.Origin}
	if o.OpenNetwork {
		meta.Network = sandbox.NetworkOpen
	}
	if o.Cache != "" && !o.FreshCache {
		meta.CacheFrom = cacheFrom(o.Cache)
	}
	if o.Script != nil {
		sum := sha256.Sum256(o.Script)
		meta.Script, meta.ScriptName = hex.EncodeToString(sum[:]), o.ScriptName
	}
	sb, err := s.Create(meta)
	if err != nil {
		return nil, err
	}
	release, err := sb.Hold()
	if err != nil {
		return nil, err
	}
	defer release()
	r.sb = sb
	r.res = &RunResult{Sandbox: sb}
	r.progress(Progress{Step: StepCreated, Sandbox: sb.ID, CacheFrom: meta.CacheFrom})
	started := time.Now()
	return r.finish(ctx, started, r.run(ctx))
}

// finish records how a run (or a reply round) ended, started then.
func (r *runner) finish(ctx context.Context, started time.Time, err error) (*RunResult, error) {
	sb := r.sb
	m, uerr := sb.Update(func(m *sandbox.Meta) {
		m.Timings.TotalMS = time.Since(started).Milliseconds()
		if err != nil {
			m.Status, m.Error = sandbox.StatusFailed, err.Error()
			if ctx.Err() != nil {
				m.Error, m.Stopped = "interrupted: "+m.Error, true
			}
		}
	})
	if err != nil {
		_ = sb.Audit(sandbox.Event{Event: sandbox.EventFailed, Data: map[string]any{"error": err.Error()}})
		r.res.Meta = m
		return r.res, fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	if uerr != nil {
		return r.res, uerr
	}
	r.res.Meta = m
	r.progress(Progress{Step: StepReady, Sandbox: sb.ID})
	return r.res, nil
}

// Baseline is a snapshot of a project, taken once: its manifest, what the
// walk left out, and when. Its files are in the content store. Several
// runs can start from one Baseline (fan-out).
type Baseline struct {
	Manifest *manifest.Manifest
	Report   *manifest.Report
	Time     time.Time
	// Commit is the project's git HEAD when the snapshot was taken ("" if
	// the project is not in a repository): a branch made from the
	// sandbox starts there.
	Commit string
}

// Snapshot walks the project with its rules (its own excludes, .gitignore,
// the secret deny-list) and puts its files into the content store.
// Progress and log may be nil.
func Snapshot(ctx context.Context, s *sandbox.Store, project string, excludes []string, progress func(Progress), log *slog.Logger) (*Baseline, error) {
	b, root, err := walkProject(ctx, s, project, excludes, progress, log)
	if err != nil {
		return nil, err
	}
	if err := storeBaseline(ctx, s, root, b); err != nil {
		return nil, err
	}
	return b, nil
}

// storeBaseline puts the files of b, a snapshot of the tree at root,
// into the content store (those not there yet: one stat each).
func storeBaseline(ctx context.Context, s *sandbox.Store, root string, b *Baseline) error {
	if err := objects.SnapshotTree(ctx, root, b.Manifest, s.Objects()); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// walkProject is Snapshot's walk, with the stat cache, and the directory
// it walked (project, made absolute where the cache was used): its files
// are not stored yet.
func walkProject(ctx context.Context, s *sandbox.Store, project string, excludes []string, progress func(Progress), log *slog.Logger) (*Baseline, string, error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	at := s.Now().UTC()
	head := promote.HeadCommit(ctx, project)
	progress(Progress{Step: StepSnapshot, Message: "snapshot " + project})
	// The stat cache lets the walk hash only the files whose stat data
	// changed since the last snapshot of this project; a cache that cannot
	// be read is an empty one, and one that cannot be written is only slower.
	// It is written again only when the walk changed it.
	var cache *manifest.HashCache
	var cachePath string
	if abs, err := filepath.Abs(project); err == nil && os.Getenv("AIRLOCK_NO_STAT_CACHE") == "" {
		project = abs
		cachePath = home.Layout{Root: filepath.Dir(s.Dir())}.StatCache(project)
		data, _ := readAtMost(cachePath, manifest.MaxSavedCache)
		cache = manifest.LoadHashCache(data, project)
	}
	base, report, err := manifest.Walk(ctx, project, manifest.WalkOptions{
		Excludes: excludes,
		Cache:    cache,
		Logger:   log,
		Progress: func(p manifest.Progress) {
			if p.Phase == manifest.PhaseHash {
				progress(Progress{Step: StepSnapshot, Message: "snapshot", Done: p.FilesHashed, Total: p.FilesTotal})
			}
		},
	})
	if err != nil {
		return nil, "", fmt.Errorf("snapshot: %w", err)
	}
	if cache != nil && cache.Changed() {
		data, err := cache.Save(project)
		if err == nil {
			if err = os.MkdirAll(filepath.Dir(cachePath), 0o700); err == nil {
				err = atomicfile.WriteFile(cachePath, data, 0o600)
			}
		}
		if err != nil {
			log.Warn("stat cache not saved", "path", cachePath, "err", err)
		}
	}
	return &Baseline{Manifest: base, Report: report, Time: at, Commit: head}, project, nil
}

// readAtMost reads the regular file at path if it holds at most max bytes.
func readAtMost(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", path, max)
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}

type runner struct {
	killed   atomic.Bool // the host stopped the VM at the hard time limit
	kept     bool        // the VM outlives the run (RunOptions.Keep)
	s        *sandbox.Store
	o        RunOptions
	project  string
	sb       *sandbox.Sandbox
	base     *manifest.Manifest // the baseline, once snapshotted (a reply round's: the round's start)
	round    bool               // a reply round: base is not the baseline
	changes  []manifest.Change  // the collect's diff of the guest's tree against base
	stored   func() error       // waits for the baseline's files to be in the content store (nil: they are)
	res      *RunResult
	progress func(Progress)
	log      *slog.Logger
	netEnv   map[string]string // the network's variables (placeholders, CA)
	cache    string            // the sandbox's copy of the cache disk, while it runs
	user     string            // the guest user the command runs as ("" root)
}

// baselineStored returns once the baseline's files are in the content
// store, with the error that copy met.
func (r *runner) baselineStored() error {
	if r.stored == nil {
		return nil
	}
	return r.stored()
}

func (r *runner) setStatus(st sandbox.Status, timing func(*sandbox.Timings)) error {
	_, err := r.sb.Update(func(m *sandbox.Meta) {
		m.Status = st
		if timing != nil {
			timing(&m.Timings)
		}
	})
	return err
}

func (r *runner) run(ctx context.Context) error {
	// Snapshot.
	if err := r.setStatus(sandbox.StatusSnapshot, nil); err != nil {
		return err
	}
	t := time.Now()
	b := r.o.Baseline
	if b == nil {
		var (
			root string
			err  error
		)
		b, root, err = walkProject(ctx, r.s, r.project, r.o.Excludes, r.progress, r.log)
		if err != nil {
			return err
		}
		// The files go into the content store while the session looks up
		// the baseline's disks and boots: only writing a disk, a push and
		// the collect need them there (baselineStored). Ending the run
		// ends the copy and waits for it.
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- storeBaseline(sctx, r.s, root, b) }()
		var once sync.Once
		var serr error
		r.stored = func() error {
			once.Do(func() { serr = <-done })
			return serr
		}
		defer func() {
			cancel()
			r.stored()
		}()
	}
	base, report, baseTime := b.Manifest, b.Report, b.Time
	r.base = base
	r.res.Report = report
	var buf bytes.Buffer
	if err := base.Encode(&buf); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(r.sb.Path(sandbox.BaselineFile), buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("snapshot: store baseline: %w", err)
	}
	baseSum := sha256.Sum256(buf.Bytes())
	if r.o.Script != nil {
		if err := atomicfile.WriteFile(r.sb.Path(sandbox.ScriptFile), r.o.Script, 0o600); err != nil {
			return fmt.Errorf("store script: %w", err)
		}
	}
	if _, err := r.sb.Update(func(m *sandbox.Meta) {
		m.Baseline, m.BaselineSHA256 = sandbox.BaselineFile, hex.EncodeToString(baseSum[:])
		m.BaselineTime = baseTime
		m.BaselineCommit = b.Commit
		m.Excluded = len(report.Excluded)
		m.Secrets = manifest.SecretPaths(report.Excluded)
		m.Timings.SnapshotMS = time.Since(t).Milliseconds()
	}); err != nil {
		return err
	}
	if err := r.sb.Audit(sandbox.Event{Event: sandbox.EventExcluded, Data: map[string]any{"excluded": report.Excluded}}); err != nil {
		return err
	}
	if err := r.sb.Audit(sandbox.Event{Event: sandbox.EventSnapshot, Data: map[string]any{
		"files": report.Files, "dirs": report.Dirs, "symlinks": report.Symlinks, "bytes": report.Bytes,
		"manifest_sha256": hex.EncodeToString(baseSum[:]),
	}}); err != nil {
		return err
	}
	r.progress(Progress{Step: StepExcluded, Excluded: report.Excluded,
		Message: fmt.Sprintf("snapshot: %d files, %d bytes, %d paths excluded", report.Files, report.Bytes, len(report.Excluded))})
	return r.session(ctx, base, report)
}

// Detacher is an optional Machine capability: leave the VM running after
// the run, under its supervisor.
type Detacher interface {
	Detach() error
}

// Killer is an optional Machine capability: force the machine off at
// once, whatever the guest does.
type Killer interface {
	Kill()
}

func (r *runner) killGrace() time.Duration {
	if r.o.KillGrace > 0 {
		return r.o.KillGrace
	}
	return DefaultKillGrace
}

// forceStop stops the machine without the guest's help, at the hard time
// limit.
func (r *runner) forceStop(m Machine) {
	r.killed.Store(true)
	r.log.Warn("time limit: the command did not end; stopping the VM", "sandbox", r.sb.ID, "timeout", r.o.Timeout)
	_ = r.sb.Audit(sandbox.Event{Event: sandbox.EventStopped, Data: map[string]any{
		"reason": fmt.Sprintf("the guest did not end the command at its %s time limit", r.o.Timeout)}})
	if k, ok := m.(Killer); ok {
		k.Kill()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = m.Shutdown(ctx)
}

// removeDisk records how much of the host's disk the workspace disk took
// (never more than its size: it is the quota) and removes it; everything
// in it is in the content store by now.
func (r *runner) removeDisk(path string) {
	if fi, err := os.Stat(path); err == nil {
		_ = r.sb.Audit(sandbox.Event{Event: sandbox.EventDisk, Data: map[string]any{"size_bytes": fi.Size(), "allocated_bytes": disk.Allocated(fi)}})
	}
	if err := os.Remove(path); err != nil {
		r.log.Warn("remove workspace disk", "sandbox", r.sb.ID, "err", err)
	}
}

// answers reports whether the guest still runs a trivial command.
func answers(ctx context.Context, m Machine) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return m.Exec(ctx, "true", nil, io.Discard, io.Discard) == nil
}

// probeTimeout bounds answers.
const probeTimeout = 15 * time.Second

// limitsEvent is the audit record of the VM's limits and network mode.
func (r *runner) limitsEvent() map[string]any {
	ev := map[string]any{"network": sandbox.NetworkNone, "disk_bytes": r.o.DiskSize, "timeout": r.o.Timeout.String()}
	if r.o.OpenNetwork {
		ev["network"], ev["unprotected"] = sandbox.NetworkOpen, "the VM can reach any host directly: no proxy, no allow-list, no request log"
	}
	if r.o.Resources != nil {
		ev["limits"] = r.o.Resources
	}
	return ev
}

// push carries the baseline to dest through tr (m is nil for the
// staging clone, made before boot) and audits it.
func (r *runner) push(ctx context.Context, tr Transfer, m Machine, report *manifest.Report, dest string) (ms int64, known transfer.Known, err error) {
	if err := r.setStatus(sandbox.StatusPushing, nil); err != nil {
		return 0, known, err
	}
	if err := r.baselineStored(); err != nil {
		return 0, known, err
	}
	t := time.Now()
	msg := "pushing"
	if r.o.Sync == sandbox.SyncVirtiofs {
		msg = "cloning into the staging directory"
	}
	total := report.Files + report.Symlinks
	r.progress(Progress{Step: StepPush, Message: msg, Total: total})
	known, err = tr.Push(ctx, m, sandbox.Workspace, r.base, r.s.Objects(), func(done, total int) {
		r.progress(Progress{Step: StepPush, Message: msg, Done: done, Total: total})
	})
	if err != nil {
		return 0, known, fmt.Errorf("push: %w", err)
	}
	ms = time.Since(t).Milliseconds()
	return ms, known, r.sb.Audit(sandbox.Event{Event: sandbox.EventPushed, Data: map[string]any{
		"files": report.Files, "bytes": report.Bytes, "dest": dest, "sync_mode": r.o.Sync, "push_ms": ms}})
}

// runCommand runs the command in /workspace with live output, keeping a
// transcript. A non-zero exit is a result, not an error.
func (r *runner) runCommand(ctx context.Context, m Machine) (code int, ms int64, err error) {
	tf, err := os.OpenFile(r.sb.Path(sandbox.TranscriptFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, 0, fmt.Errorf("open transcript: %w", err)
	}
	defer tf.Close()
	capped := headtail.New(tf, "transcript", TranscriptHead, TranscriptTail)
	defer capped.Close() // on an early return too: the tail is written
	tr := lockio.NewWriter(capped)
	args := r.o.Command
	if r.o.Script != nil {
		args = append([]string{"sh", scriptPath}, r.o.Command...)
	}
	if err := r.sb.Audit(sandbox.Event{Event: sandbox.EventCommand, Data: map[string]any{"argv": args, "dir": sandbox.Workspace, "script_sha256": scriptSum(r.o.Script)}}); err != nil {
		return 0, 0, err
	}
	shown := strings.Join(args, " ")
	if r.o.Script != nil {
		shown = strings.Join(append([]string{"sh", r.o.ScriptName}, r.o.Command...), " ")
	}
	r.progress(Progress{Step: StepRun, Message: "running " + shown + " in " + sandbox.Workspace})
	liveOut, liveErr := liveWriters(r.o.Stdout, r.o.Stderr)
	stdout := teeWriter(liveOut, tr)
	var captured *capWriter // the agent's stdout, for its final message
	if r.o.FinalMessage != nil {
		captured = &capWriter{w: stdout, max: MaxAgentOutput}
		stdout = captured
	}
	cmd := client.Command{
		Args: args, Dir: sandbox.Workspace, Env: r.commandEnv(), Stdin: r.o.Stdin, User: r.user,
		Stdout: stdout, Stderr: teeWriter(liveErr, tr), TTY: r.o.TTY, Jail: r.jail(),
	}
	runCtx, stop := r.timeLimited(ctx, m)
	defer stop()
	t := time.Now()
	err = m.Run(runCtx, cmd)
	ms = time.Since(t).Milliseconds()
	var exit *client.ExitError
	timedOut := false
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case runCtx.Err() != nil && ctx.Err() == nil:
		timedOut, code = true, sandbox.TimeoutExitCode
		fmt.Fprintf(tr, "\nairlock: the command ran longer than %s and was killed; what it changed until then is collected\n", r.o.Timeout)
		// client.Run gives up on a guest that does not confirm the kill:
		// one that does not answer now either is stopped, not waited on.
		if !r.killed.Load() && !answers(ctx, m) {
			r.forceStop(m)
		}
	default:
		return 0, ms, fmt.Errorf("run %s: %w", args[0], err)
	}
	if err := r.closeCapped(capped, sandbox.TranscriptFile); err != nil {
		return 0, ms, err
	}
	r.res.ExitCode = code
	if captured != nil {
		if err := r.keepFinalMessage(captured); err != nil {
			return 0, ms, err
		}
	}
	ev := map[string]any{"exit_code": code, "run_ms": ms}
	if timedOut {
		ev["timed_out"] = r.o.Timeout.String()
	}
	if exit != nil && exit.Signal != "" {
		ev["signal"] = exit.Signal
	}
	if err := r.sb.Audit(sandbox.Event{Event: sandbox.EventExit, Data: ev}); err != nil {
		return code, ms, err
	}
	if err := r.auditDenials(ctx, m); err != nil {
		return code, ms, err
	}
	return code, ms, r.checkDisk(ctx, m, code)
}

// jail is the command's client.Command.Jail: JailWrite, or nil with
// Hooks.NoJail.
func (r *runner) jail() []string {
	if r.o.NoJail {
		return nil
	}
	return JailWrite
}

// auditDenials records the calls the agent's jail refused the command
// (EventSeccomp), as the guest's kernel counted them: the guest's word,
// checked for shape and bounded, and only information (a guest that
// lies hides its own poking). A guest that cannot count them (an
// answer that is not one) leaves no event and fails nothing.
func (r *runner) auditDenials(ctx context.Context, m Machine) error {
	var stdout, stderr headtail.Head
	stdout.Max, stderr.Max = 8<<10, 2<<10
	if err := m.Exec(ctx, transfer.ShellCommand(transfer.DefaultAgentPath, "jail-denials"), nil, &stdout, &stderr); err != nil {
		return nil
	}
	counts, err := parseDenials([]byte(stdout.String()))
	if err != nil || len(counts) == 0 {
		return nil
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	return r.sb.Audit(sandbox.Event{Event: sandbox.EventSeccomp, Data: map[string]any{"denied": total, "syscalls": counts}})
}

// maxDenialNames bounds the syscalls an EventSeccomp names.
const maxDenialNames = 64

// denialName is a syscall's name as the guest may give it.
var denialName = regexp.MustCompile(`^(?:[a-z0-9_]{1,32}|syscall [0-9]{1,6})$`)

// parseDenials reads airlock-guest jail-denials' JSON: syscall names and
// counts, each name of denialName's shape, each count 1 to a billion.
func parseDenials(b []byte) (map[string]int, error) {
	var raw map[string]int
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	if len(raw) > maxDenialNames {
		return nil, fmt.Errorf("%d syscalls named, over %d", len(raw), maxDenialNames)
	}
	for name, n := range raw {
		if !denialName.MatchString(name) || n < 1 || n > 1e9 {
			return nil, fmt.Errorf("not a count of denials: %q %d", name, n)
		}
	}
	return raw, nil
}

// closeCapped writes the end of a log the guest filled (the tail kept
// past its head) and, when the cap left bytes out, records how many in
// the audit log.
func (r *runner) closeCapped(w *headtail.Writer, file string) error {
	st, err := w.Close()
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if !st.Capped() {
		return nil
	}
	return r.sb.Audit(sandbox.Event{Event: sandbox.EventCapped, Data: map[string]any{
		"log": file, "seen_bytes": st.Seen, "kept_bytes": st.Kept, "left_out_bytes": st.LeftOut,
		"head_bytes": TranscriptHead, "tail_bytes": TranscriptTail}})
}

// commandEnv is the environment of the command and of the verify step:
// the network's variables, the fan-out's, then RunOptions.Env.
func (r *runner) commandEnv() map[string]string {
	if len(r.netEnv) == 0 && r.o.Group == "" {
		return r.o.Env
	}
	env := maps.Clone(r.netEnv)
	if env == nil {
		env = map[string]string{}
	}
	if r.o.Group != "" {
		env["AIRLOCK_GROUP"], env["AIRLOCK_ATTEMPT"] = r.o.Group, strconv.Itoa(r.o.Attempt)
	}
	maps.Copy(env, r.o.Env)
	return env
}

func scriptSum(script []byte) string {
	if script == nil {
		return ""
	}
	sum := sha256.Sum256(script)
	return hex.EncodeToString(sum[:])
}

// collect fetches the guest's manifest of /workspace (only the changes
// since what the guest knows, when it knows the pushed tree), keeps it,
// and pulls every changed file (and the agent's summary) into the content
// store.
func (r *runner) collect(ctx context.Context, tr Transfer, m Machine, base *manifest.Manifest, known transfer.Known) error {
	k, err := tr.Manifest(ctx, m, sandbox.Workspace, known, r.o.Limits, r.o.Excludes)
	if err != nil {
		return err
	}
	// A file left out for its size is no change: the baseline's entry
	// stays at its path (a file the command grew past the cap is not
	// "deleted"; a new one is simply absent).
	gm := manifest.KeepLeftOut(k.Manifest, base, k.Skipped)
	if len(k.Skipped) > 0 {
		if err := r.sb.Audit(sandbox.Event{Event: sandbox.EventSkipped, Data: map[string]any{"skipped": k.Skipped}}); err != nil {
			return err
		}
		r.progress(Progress{Step: StepCollect, Excluded: k.Skipped, Message: skippedMessage(k.Skipped, r.o.Limits.FileSizeCap())})
	}
	var buf bytes.Buffer
	if err := gm.Encode(&buf); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(r.sb.Path(sandbox.GuestFile), buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("store guest manifest: %w", err)
	}
	changes := manifest.Diff(sandbox.WithoutMeta(base), sandbox.WithoutMeta(gm))
	r.changes = changes
	var pull []manifest.Change
	have := map[string]bool{} // each content looked up once: many files are empty
	for _, c := range changes {
		if c.New == nil || c.New.Type != manifest.File {
			continue
		}
		h, ok := have[c.New.SHA256]
		if !ok {
			h = r.s.Objects().Has(c.New.SHA256)
			have[c.New.SHA256] = h
		}
		if !h {
			pull = append(pull, c)
		}
	}
	summary, hasSummary := gm.Lookup(sandbox.SummaryPath)
	hasSummary = hasSummary && summary.Type == manifest.File && summary.Size <= maxSummary
	if hasSummary && !r.s.Objects().Has(summary.SHA256) {
		pull = append(pull, manifest.Change{Kind: manifest.Added, Path: summary.Path, New: &summary})
	}
	if len(pull) > 0 {
		if err := tr.Pull(ctx, m, sandbox.Workspace, pull, r.s.Objects(), r.o.Limits, func(done, total int) {
			r.progress(Progress{Step: StepCollect, Message: "pulling", Done: done, Total: total})
		}); err != nil {
			return err
		}
	}
	if hasSummary {
		data, err := sandbox.ReadObject(r.s.Objects(), summary.SHA256)
		if err != nil {
			return fmt.Errorf("read the agent's summary: %w", err)
		}
		if err := atomicfile.WriteFile(r.sb.Path(sandbox.SummaryFile), data, 0o600); err != nil {
			return fmt.Errorf("store the agent's summary: %w", err)
		}
		r.res.Summary = string(data)
	}
	return nil
}

// putScript copies a --script into the guest, outside /workspace.
// userName is what an account name may be (as useradd allows by default).
var userName = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// ErrNoUser means the guest has no such user to run the command as (the
// image lacks it).
var ErrNoUser = errors.New("the image has no such user")

// DefaultUserer is a Machine whose image names the user commands run as
// by default.
type DefaultUserer interface {
	DefaultUser() string
}

// chownWorkspace gives the pushed /workspace to user (the push wrote it as
// root), so the command, run as user, can change it.
func chownWorkspace(ctx context.Context, m Machine, user string) error {
	if !userName.MatchString(user) {
		return fmt.Errorf("user %q: not a valid account name", user)
	}
	var stderr bytes.Buffer
	if err := m.Exec(ctx, "chown -R -h "+user+": "+sandbox.Workspace, nil, nil, &stderr); err != nil {
		return fmt.Errorf("give %s to %s in the VM: %w (%s): %w", sandbox.Workspace, user, err, strings.TrimSpace(stderr.String()), ErrNoUser)
	}
	return nil
}

func putScript(ctx context.Context, m Machine, script []byte) error {
	var stderr bytes.Buffer
	if err := m.Exec(ctx, "cat > "+scriptPath, bytes.NewReader(script), nil, &stderr); err != nil {
		return fmt.Errorf("copy script into the VM: %w (%s)", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// teeWriter writes to the live stream (if any) and the transcript; a
// failing live stream does not stop the transcript.
// keepFinalMessage reads the agent's final message from its captured
// stdout and keeps it with the sandbox.
func (r *runner) keepFinalMessage(c *capWriter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.over {
		return nil
	}
	msg, ok := r.o.FinalMessage(c.buf.Bytes())
	if !ok || strings.TrimSpace(msg) == "" {
		return nil
	}
	if err := atomicfile.WriteFile(r.sb.Path(sandbox.FinalFile), []byte(msg), 0o600); err != nil {
		return fmt.Errorf("store the agent's final message: %w", err)
	}
	r.res.FinalMessage = msg
	return nil
}

// capWriter passes writes on to w and keeps the first max bytes; over is
// set once more came.
type capWriter struct {
	mu   sync.Mutex
	w    io.Writer
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	if !c.over && c.buf.Len()+len(p) <= c.max {
		c.buf.Write(p)
	} else {
		c.over = true
		c.buf.Reset()
	}
	c.mu.Unlock()
	return c.w.Write(p)
}

// liveWriters are the command's live stdout and stderr: one writer given
// for both (a terminal widget, a buffer) gets writes from the two
// streams' copiers at once, so it is locked.
func liveWriters(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if stdout != nil && sameWriter(stdout, stderr) {
		w := lockio.NewWriter(stdout)
		return w, w
	}
	return stdout, stderr
}

// sameWriter reports whether a and b are the same writer (false for
// writers that cannot be compared).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

func teeWriter(live io.Writer, transcript io.Writer) io.Writer {
	if live == nil {
		return transcript
	}
	return &tee{live: live, tr: transcript}
}

type tee struct {
	live, tr io.Writer
}

func (t *tee) Write(p []byte) (int, error) {
	_, _ = t.live.Write(p)
	return t.tr.Write(p)
}

// skippedMessage tells the user what the guest left out of its changes,
// quoting the paths (they come from the guest); a file left out for its
// size is named with its size and maxFile, the cap, and the message says
// how to raise it.
func skippedMessage(skipped []manifest.Exclusion, maxFile int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "left out of the changes (%d): ", len(skipped))
	large := false
	for i, x := range skipped {
		large = large || x.Reason == manifest.ReasonTooLarge
		if i == 5 {
			fmt.Fprintf(&b, ", and %d more (airlock logs --audit)", len(skipped)-i)
			continue
		}
		if i > 5 {
			continue
		}
		if i > 0 {
			b.WriteString(", ")
		}
		what := string(x.Reason)
		switch x.Reason {
		case manifest.ReasonSpecial:
			what = "special file " + x.Rule
		case manifest.ReasonTooLarge:
			what = fmt.Sprintf("%s, over the %s cap", bytesize.Format(x.Size), bytesize.Format(maxFile))
		}
		fmt.Fprintf(&b, "%q (%s)", x.Path, what)
	}
	if large {
		b.WriteString("; the rest of the changes are kept. To take a larger file, raise the cap: --max-file-size, or max_file_size in the [limits] of your config.toml")
	}
	return b.String()
}

// timeLimited is ctx bounded by the run's timeout, for a command in the
// guest: the guest ends the command when it ends; a guest that does not
// (hung, or hostile) is stopped by the host a grace later. stop ends
// both.
func (r *runner) timeLimited(ctx context.Context, m Machine) (_ context.Context, stop func()) {
	if r.o.Timeout <= 0 {
		return ctx, func() {}
	}
	runCtx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	hard := time.AfterFunc(r.o.Timeout+r.killGrace(), func() { r.forceStop(m) })
	return runCtx, func() {
		hard.Stop()
		cancel()
	}
}
