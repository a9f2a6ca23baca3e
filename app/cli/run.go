package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/vm"
)

type runFlags struct {
	bootFlags
	project     string
	script      string
	interactive bool
	env         []string
	limits      limitFlags
	sync        string

	netFlags
	trustProject bool
	docker       bool
	fanOut       int
	parallel     int
	verify       string
	noVerify     bool
	noCache      bool
	freshCache   bool
	keep         bool
	// replyTo and message make runRun a reply round of that sandbox.
	replyTo, message string
	agent            agentFlags
}

// runResult is what `airlock run --json` prints.
type runResult struct {
	Sandbox  string               `json:"sandbox"`
	Status   sandbox.Status       `json:"status"`
	SyncMode sandbox.SyncMode     `json:"sync_mode"`
	ExitCode int                  `json:"exit_code"`
	Changes  *sandbox.ChangeStats `json:"changes,omitempty"`
	Excluded []manifest.Exclusion `json:"excluded"`
	// Skipped is what the guest left out of the changes (special files,
	// unreadable directories, invalid names, files over the per-file cap
	// with their size: reason "too-large").
	Skipped []manifest.Exclusion `json:"skipped,omitempty"`
	Summary string               `json:"summary,omitempty"`
	// FinalMessage is an agent preset's final message, read from its
	// JSON output (the preset's rationale.json_field).
	FinalMessage string          `json:"final_message,omitempty"`
	Timings      sandbox.Timings `json:"timings"`
	// Network is "open" when the VM had an unprotected network device.
	Network sandbox.NetworkMode   `json:"network"`
	Limits  config.Limits         `json:"limits"`
	Verify  *sandbox.VerifyResult `json:"verify,omitempty"`
	// DiskFull is set when the sandbox's disk was full as the command
	// ended: its size and what was used, in bytes.
	DiskFull *sandbox.DiskUsage `json:"disk_full,omitempty"`
	// Actions counts the requests of this round held for review
	// (airlock actions ID lists them).
	Actions int    `json:"actions,omitempty"`
	Error   string `json:"error,omitempty"`
}

const runLong = `run snapshots the project (honouring .gitignore, airlock.toml excludes and
Airlock's secret deny-list: secrets such as .env files and private keys are
never copied; up to three are named, more are counted and airlock status ID
lists them), boots a fresh VM with the snapshot at /workspace, runs COMMAND
there with live output, and collects what it changed. The VM is then shut
down; the changes wait in a sandbox for review: airlock diff, airlock
apply, airlock rm.

By default (--sync disk) the snapshot is written on the host as a
read-only disk (cached: the same tree is not written twice) that the VM
mounts under an overlay at /workspace; what the command writes goes to the
VM's own disk, and only that is collected. --sync copy pushes the snapshot
file by file onto the VM's own disk instead (an image that does not record
the command user's uid falls back to it, saying so).

--sync virtiofs is for very large trees: instead of a disk, Airlock clones
the snapshot into a staging directory of the sandbox (never the project
itself) and shares that into the VM at /workspace over virtio-fs; the
changes are collected from the staging clone once the VM is gone, with the
same checks, then reviewed and applied the same way. Such a VM cannot be
snapshotted. Needs virtiofsd (Debian: qemu-system-common) and root.

The VM has no network device. Its only way out is Airlock's proxy on the
host, which allows what your configuration (~/.config/airlock/config.toml,
[network] allow), --allow and a confirmed airlock.toml allow, and nothing
else; every request is shown on stderr and kept in the audit log. Secrets
(API keys) stay on the host: the VM sees placeholders, and the proxy puts
the real value in the configured header on the way to its one host.
A package registry is allowed read-only by its name: --allow @npm, @pypi,
@go, @crates, @rubygems, @maven or @debian (its hosts, GET and HEAD only).

--agent NAME runs an agent preset (airlock agents lists them: claude,
codex, gemini, and yours from agents.toml) on the task given by --prompt or
--prompt-file: its non-interactive command with the task as one argument,
its environment, its API hosts allowed through the proxy and its API key
(ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY) kept on the host. The
agent's CLI must be in the image: without --image, the preset's image is
used (full for claude, codex and gemini: airlock image build full). --agent
and a command after -- exclude each other. Several agents (--agent
claude,codex) run side by side from one snapshot, and are compared.

The agent may explain itself in .airlock/summary.md in the workspace: it is
kept with the sandbox and shown, and .airlock/ is never part of the changes.

With --script FILE, the POSIX shell script FILE is copied into the VM
(outside /workspace, so it is not part of the changes) and run with sh, the
arguments after -- passed to it.

Limits: the VM gets --cpus, --memory and a disk of its own of --disk for
/workspace (its quota: a full disk is "No space left on device" in the VM,
and run says the disk was full when it still is as a failed command ends);
--timeout stops the command (exit 124, its work still collected) and the
host stops the VM if the command does not end; --max-pull-bytes,
--max-files and --max-file-size cap what is collected. Defaults come from
[limits] in ~/.config/airlock/config.toml, then airlock.toml (which can
only lower them); airlock doctor shows the effective values.

The VM has no network device unless you pass --open-network (or set
open_network = true in your config.toml; a project's airlock.toml cannot):
the VM can then reach any host directly, unprotected, and Airlock says so.

With --quiet (-q) run prints only what needs you: the command's own
output, errors, warnings, and the sandbox with what to do next; no
progress, no list of what was left out, no summary of the changes. --json
is unaffected.

airlock exits with the command's exit code (its changes are collected
either way), or 125 when Airlock itself failed; a failed sandbox is kept for
inspection (airlock logs ID).`

// register adds run's flags to cmd.
func (f *runFlags) register(cmd *cobra.Command) {
	f.bootFlags.register(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&f.project, "project", "p", ".", "the project directory (only read: changes wait for airlock apply)")
	fl.StringVar(&f.script, "script", "", "a shell script to copy into the VM and run with sh (arguments after -- go to it)")
	fl.BoolVarP(&f.interactive, "interactive", "i", false, "pass standard input to the command")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "set an environment variable, NAME=VALUE (repeatable)")
	fl.StringVar(&f.sync, "sync", string(sandbox.SyncDisk), "how the project reaches the VM: disk (the project as a read-only disk written on the host, under an overlay), copy (pushed file by file onto its disk) or virtiofs (a shared staging clone)")
	f.limits.registerTimeout(fl, "kill the command after this long and collect what it changed (exit code 124)")
	f.limits.registerRun(fl)
	f.netFlags.register(cmd)
	fl.IntVar(&f.fanOut, "fan-out", 1, fmt.Sprintf("run the same command N times (up to %d), each in its own sandbox and VM, all from one snapshot, then compare them", pipeline.MaxFanOut))
	fl.StringVar(&f.verify, "verify", "", `a shell command to run in the VM after the agent, e.g. "go test ./..." (default: the project's airlock.toml verify); its output and exit status are part of the review`)
	fl.BoolVar(&f.noVerify, "no-verify", false, "skip the verify step, even the project's")
	fl.BoolVar(&f.freshCache, "fresh-cache", false, "start with empty dependency caches instead of the project's (kept from a sandbox's run whose verify passed, which could sway the result); this run's take their place if its verify passes")
	fl.BoolVar(&f.noCache, "no-cache", false, "no dependency caches: start with none and keep none (a project's caches are on /var/cache/airlock in the VM, kept from its last run whose verify passed)")
	fl.BoolVar(&f.keep, "keep", false, "leave the VM running after the run, under its supervisor until the idle TTL (airlock exec ID, checkpoint, rollback, stop)")
	fl.IntVar(&f.parallel, "parallel", 0, "with --fan-out, how many VMs at once (default: as many as the host's memory holds)")
	f.agent.register(cmd)
	fl.BoolVar(&f.trustProject, "trust-project", false, "confirm what the project's airlock.toml asks for beyond your configuration (remembered until the file changes)")
	fl.BoolVar(&f.docker, "docker", false, "start a Docker Engine in the VM before the command (a root daemon inside the VM, never the host's; the project's environment, or the agent image, built once with Debian's docker.io; as docker = true in airlock.toml)")
}

func newRunCmd(e *env) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --project DIR [flags] (--agent NAME --prompt TEXT | -- COMMAND [ARG...])",
		Short: "Run a command (an agent) on a copy of a project in a fresh VM and keep its changes for review",
		Long:  runLong,
		Example: `  airlock run --project . -- sh -c 'echo hi >> README.md'
  airlock run --project ~/src/app --script examples/demo-agent.sh
  airlock run --project ~/src/monorepo --sync virtiofs -- make test
  airlock run --project . --allow pypi.org --allow files.pythonhosted.org -- pip download requests
  airlock run --project . --allow @pypi -- pip download requests
  airlock run --project . -i -- claude -p "fix the failing test" < prompt.txt
  airlock run --project . --agent claude --prompt "fix the failing test"
  airlock run --project . --agent codex --prompt-file task.md`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && f.script == "" && len(f.agent.names) == 0 {
				return errors.New("no command: give --agent NAME --prompt TEXT, a command after --, or --script FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.agent.promptFile == "-" && f.interactive {
				return errors.New("--prompt-file - reads the prompt from standard input, which -i also gives the command: use one of them")
			}
			names, prompt, err := f.agent.resolve(e, args, cmd.ArgsLenAtDash(), f.script)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("image") {
				f.image = "" // the agent preset's image, else minimal
			}
			req := plan.Request{Agents: names, Prompt: prompt, Command: args}
			return runRun(cmd.Context(), e, &f, req)
		},
	}
	f.register(cmd)
	return cmd
}

// runRun plans req with the flags (a run, its fan-out, or with
// f.replyTo a reply round) and runs it: several attempts start from one
// snapshot and are compared.
func runRun(ctx context.Context, e *env, f *runFlags, req plan.Request) error {
	if err := f.check(len(req.Agents)); err != nil {
		return err
	}
	if err := f.request(&req); err != nil {
		return err
	}
	store, err := e.sandboxes()
	if err != nil {
		return err
	}
	errw := lockio.NewWriter(e.stderr)
	pl, err := e.openPlanner(errw)
	if err != nil {
		return err
	}
	pn, err := pl.Run(ctx, req)
	if err != nil {
		return err
	}
	defer pn.Close()
	if e.onPlan != nil {
		if err := e.onPlan(pn); err != nil {
			return err
		}
	}
	if pn.Round != nil {
		e.note("%s", replyNote(pn.Round.Feedback))
	}
	if pn.OpenNetwork {
		e.warnOpenNetwork()
	}
	if pn.FanOut() {
		return runFanOut(ctx, e, store, pn, errw)
	}
	return runOne(ctx, e, store, pn, f.interactive, errw)
}

// check refuses flags that do not go together, in the flags' words.
// The planner bounds the attempts and refuses a kept VM beside others.
func (f *runFlags) check(agents int) error {
	if f.fanOut < 1 {
		return fmt.Errorf("--fan-out %d: give 1 to %d attempts", f.fanOut, pipeline.MaxFanOut)
	}
	if f.fanOut*max(agents, 1) > 1 && f.interactive {
		return errors.New("several attempts (--fan-out, several --agent) run side by side: they cannot share standard input (-i)")
	}
	return nil
}

// request fills req (its agents, prompt and command already set) from
// the flags.
func (f *runFlags) request(req *plan.Request) error {
	var err error
	if req.Env, err = parseEnv(f.env); err != nil {
		return err
	}
	if f.script != "" {
		if req.Script, err = os.ReadFile(f.script); err != nil {
			return fmt.Errorf("read --script: %w", err)
		}
		req.ScriptName = filepath.Base(f.script)
	}
	req.Project, req.Image, req.Arch, req.Sync = f.project, f.image, f.arch, f.sync
	req.Limits, req.OpenNetwork, req.Allow, req.TrustProject = f.limits.request(&f.bootFlags), f.openNetwork, f.allow, f.trustProject
	req.Docker = f.docker
	req.Verify, req.NoVerify, req.Keep, req.FanOut, req.Parallel = f.verify, f.noVerify, f.keep, f.fanOut, f.parallel
	if f.noCache && f.freshCache {
		return errors.New("--no-cache and --fresh-cache: choose one (--no-cache starts with no caches and keeps none; --fresh-cache starts with empty ones and keeps them if the run's verify passes)")
	}
	req.NoCache, req.FreshCache = f.noCache, f.freshCache
	req.Link, req.BootTimeout, req.Cold = vm.LinkKind(f.link), f.bootTimeout, f.cold
	req.Reply, req.Message = f.replyTo, f.message
	return nil
}

// runOne runs the plan's one attempt (or reply round) with live output
// and progress, then reports it.
func runOne(ctx context.Context, e *env, store *sandbox.Store, pn *plan.Plan, interactive bool, errw *lockio.Writer) error {
	p := e.newProgress()
	defer p.Done("")
	var seen runSeen
	opts := &pn.Runs[0]
	opts.Stdout, opts.Stderr, opts.Progress = e.stdout, errw, seen.render(e, p, opts.Sync)
	if interactive {
		opts.Stdin = e.stdin
	}
	if e.json {
		opts.Stdout, opts.Stderr = nil, nil // in the transcript (airlock logs ID)
	}
	out, err := pipeline.Execute(ctx, store, pn.Job)
	p.Done("")
	res := out.Result()
	if res == nil {
		return err
	}
	if e.json {
		return printRunJSON(e, res, err, pn, seen)
	}
	id := res.Sandbox.ID
	if err != nil && ctx.Err() != nil {
		e.needed("interrupted: sandbox %s is kept, marked failed (airlock logs %s shows what ran; airlock rm %s removes it)", id, id, id)
		return err
	}
	if err != nil {
		return fmt.Errorf("%w\nthe sandbox is kept for inspection: airlock logs %s (airlock rm %s removes it)", err, id, id)
	}
	if res.FinalMessage != "" && res.Summary == "" && !e.quiet {
		printFinalMessage(e, res.FinalMessage, opts.Agent)
	}
	printRunSummary(e, res)
	e.exitCode = res.ExitCode
	return nil
}

// runSeen is what a run's progress told that its result does not hold:
// what the snapshot and the guest left out.
type runSeen struct {
	sandbox           string
	excluded, skipped []manifest.Exclusion
}

// render shows a run's progress events on the progress line and stderr.
func (s *runSeen) render(e *env, p *progressLine, mode sandbox.SyncMode) func(pipeline.Progress) {
	return func(ev pipeline.Progress) {
		switch ev.Step {
		case pipeline.StepCreated:
			s.sandbox = ev.Sandbox
			e.note("sandbox %s (sync: %s)", ev.Sandbox, mode)
			if ev.CacheFrom != "" {
				e.note("starts with the dependency caches kept by sandbox %s's run (its verify passed): what it left there can sway this result; --fresh-cache starts without them", ev.CacheFrom)
			}
		case pipeline.StepSnapshot:
			p.stepOrUpdate("snapshot", counted(ev.Message, ev.Done, ev.Total))
		case pipeline.StepExcluded:
			p.Done(ev.Message)
			s.excluded = ev.Excluded
			if !e.json {
				printExclusions(e, s.sandbox, ev.Excluded)
			}
		case pipeline.StepBoot:
			p.Step(ev.Message)
		case pipeline.StepPush:
			p.stepOrUpdate("push", counted(ev.Message, ev.Done, ev.Total))
		case pipeline.StepRun:
			p.Done("")
			e.note("%s", ev.Message)
		case pipeline.StepCollect:
			if len(ev.Excluded) > 0 {
				s.skipped = ev.Excluded
				// Even with --quiet: part of the work is not in the changes.
				e.needed("%s", shownLine(e.stderr, ev.Message)) // guest paths
				break
			}
			p.stepOrUpdate("collect", counted(ev.Message, ev.Done, ev.Total))
		case pipeline.StepStop:
			p.stepOrUpdate("stop", ev.Message)
		case pipeline.StepReady:
			p.Done("")
		}
	}
}

// printRunJSON prints what airlock run --json prints: the result, or
// the error with the sandbox it left.
func printRunJSON(e *env, res *pipeline.RunResult, err error, pn *plan.Plan, seen runSeen) error {
	m := res.Meta
	out := runResult{FinalMessage: res.FinalMessage, Sandbox: res.Sandbox.ID, Status: m.Status, SyncMode: m.SyncMode, ExitCode: res.ExitCode, Changes: m.Changes,
		Excluded: seen.excluded, Skipped: seen.skipped, Summary: res.Summary, Timings: m.Timings, Network: sandbox.NetworkNone, Limits: pn.Limits, Verify: m.Verify, DiskFull: m.DiskFull}
	if pn.OpenNetwork {
		out.Network = sandbox.NetworkOpen
	}
	if out.Excluded == nil {
		out.Excluded = []manifest.Exclusion{}
	}
	out.Actions = heldThisRound(res)
	if err != nil {
		out.Error = err.Error()
	}
	if perr := e.printJSON(out); perr != nil {
		return perr
	}
	e.exitCode = res.ExitCode
	if err != nil {
		e.exitCode = ExitError
	}
	return nil
}

// printFinalMessage shows the agent's final message, read from its
// output, when it wrote no summary.
func printFinalMessage(e *env, final, agentName string) {
	field := "its final message"
	if presets, err := loadAgents(); err == nil && presets[agentName].Rationale.JSONField != "" {
		field = presets[agentName].Rationale.JSONField
	}
	fmt.Fprintf(e.stdout, "\nThe agent's final message (%s of its output):\n", field)
	for _, l := range strings.Split(strings.TrimRight(final, "\n"), "\n") {
		fmt.Fprintln(e.stdout, "  "+shownLine(e.stdout, l))
	}
}

// note prints a line for people on stderr, unless --quiet or --json.
func (e *env) note(format string, args ...any) {
	if e.quiet || e.json {
		return
	}
	fmt.Fprintf(e.stderr, "airlock: "+format+"\n", args...)
}

// needed prints a line on stderr that needs the user (what happened to
// a sandbox, what to do next): even with --quiet, not with --json.
func (e *env) needed(format string, args ...any) {
	if e.json {
		return
	}
	fmt.Fprintf(e.stderr, "airlock: "+format+"\n", args...)
}

func counted(msg string, done, total int) string {
	if total > 0 {
		return fmt.Sprintf("%s %d/%d", msg, done, total)
	}
	return msg
}

// stepOrUpdate starts a step named key, or updates it when it is the
// current one.
func (p *progressLine) stepOrUpdate(key, msg string) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	same := p.stop != nil && p.key == key
	p.mu.Unlock()
	if same {
		p.Update(msg)
		return
	}
	p.Step(msg)
	p.mu.Lock()
	p.key = key
	p.mu.Unlock()
}

// inlineSecrets is how many secrets a run names on its own line; more are
// counted in one line that points to airlock status, which lists them.
const inlineSecrets = 3

// printExclusions tells what the snapshot of sandbox id left out, in at
// most two lines however large the tree: the secrets (never copied, and
// the user should know) by name when there are few, else counted with
// their kinds, and the rest counted by reason. With --quiet it says
// nothing: airlock status lists the secrets.
func printExclusions(e *env, id string, ex []manifest.Exclusion) {
	if e.quiet || len(ex) == 0 {
		return
	}
	for _, l := range exclusionLines(id, ex) {
		// The names are the project's own, which a cloned repository
		// chose: shown through the safe renderer on a terminal.
		fmt.Fprintln(e.stderr, "airlock: "+shownLine(e.stderr, l))
	}
}

// exclusionLines are printExclusions' lines, without the "airlock: ".
func exclusionLines(id string, ex []manifest.Exclusion) []string {
	counts := map[manifest.Reason]int{}
	var order []manifest.Reason
	var secrets []manifest.Exclusion
	for _, x := range ex {
		if x.Reason == manifest.ReasonSecret {
			secrets = append(secrets, x)
			continue
		}
		if counts[x.Reason] == 0 {
			order = append(order, x.Reason)
		}
		counts[x.Reason]++
	}
	var lines []string
	switch {
	case len(secrets) > inlineSecrets:
		lines = append(lines, fmt.Sprintf("not copied, %d secret-looking files (%s): airlock status %s lists them",
			len(secrets), secretKinds(secrets), id))
	default:
		for _, x := range secrets {
			rule := ""
			if x.Rule != "" {
				rule = " (" + x.Rule + ")"
			}
			lines = append(lines, fmt.Sprintf("not copied, looks like a secret: %s%s", x.Name(), rule))
		}
	}
	if len(order) == 0 {
		return lines
	}
	parts := make([]string, 0, len(order))
	for _, r := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], reasonLabel(r)))
	}
	return append(lines, fmt.Sprintf("also not copied: %s (airlock logs --audit %s lists them)", strings.Join(parts, ", "), id))
}

// secretKinds names the deny-list rules that matched secrets, most
// matched first, at most two and "…" for the rest: "private key or
// certificate bundle, environment file, …". A rule's name is its text
// before the parenthesis of examples.
func secretKinds(secrets []manifest.Exclusion) string {
	counts := map[string]int{}
	var kinds []string
	for _, x := range secrets {
		k, _, _ := strings.Cut(x.Rule, " (")
		if k == "" {
			k = "secret"
		}
		if counts[k] == 0 {
			kinds = append(kinds, k)
		}
		counts[k]++
	}
	sort.SliceStable(kinds, func(i, j int) bool { return counts[kinds[i]] > counts[kinds[j]] })
	if len(kinds) > 2 {
		kinds = append(kinds[:2], "…")
	}
	return strings.Join(kinds, ", ")
}

func reasonLabel(r manifest.Reason) string {
	switch r {
	case manifest.ReasonGitignore:
		return "ignored by .gitignore"
	case manifest.ReasonConfig:
		return "excluded by airlock.toml"
	case manifest.ReasonGitDir:
		return ".git"
	case manifest.ReasonSpecial:
		return "special files"
	case manifest.ReasonInvalidName:
		return "with names Airlock cannot carry"
	case manifest.ReasonUnreadable:
		return "unreadable"
	}
	return string(r)
}

// printRunSummary tells how the run ended and what to do next. With
// --quiet it keeps only what needs the user: the sandbox, its status,
// warnings, the verify result, and the commands to review, apply or
// discard, or "no changes".
func printRunSummary(e *env, res *pipeline.RunResult) {
	id := res.Sandbox.ID
	m := res.Meta
	w := e.stdout
	if !e.quiet {
		fmt.Fprintln(w)
	}
	if res.Summary != "" && !e.quiet {
		fmt.Fprintln(w, "The agent's summary (.airlock/summary.md):")
		for _, l := range strings.Split(strings.TrimRight(res.Summary, "\n"), "\n") {
			fmt.Fprintln(w, "  "+shownLine(w, l))
		}
		fmt.Fprintln(w)
	}
	exit := fmt.Sprintf("the command exited %d", res.ExitCode)
	fmt.Fprintf(w, "Sandbox %s is %s (%s, sync %s, %.1fs).\n", id, m.Status, exit, syncMode(m.SyncMode), float64(m.Timings.TotalMS)/1000)
	if m.Network.Open() {
		fmt.Fprintln(w, "  "+openNetworkWarning)
	}
	if m.Verify != nil {
		fmt.Fprintf(w, "  verify %s: %s (airlock logs %s shows its output)\n", m.Verify.Command, m.Verify, id)
	}
	if m.DiskFull != nil {
		fmt.Fprintln(w, "  "+pipeline.DiskFullMessage(*m.DiskFull))
	}
	if c := m.Changes; c != nil && c.Files > 0 {
		if !e.quiet {
			fmt.Fprintf(w, "  %s; %d %s added, %d removed\n", describeStats(c), c.LinesAdded, plural(c.LinesAdded, "line", "lines"), c.LinesRemoved)
		}
		if c.Overview != "" && !e.quiet {
			// Made safe by review; again here, as it is read back from sandbox.json.
			fmt.Fprintln(w, "  What changed: "+safetext.Line(c.Overview))
		}
		fmt.Fprintf(w, "Review: airlock diff %s   Apply: airlock apply %s --all   Discard: airlock rm %s\n", id, id, id)
	} else {
		fmt.Fprintln(w, "  no changes")
	}
	if held := heldThisRound(res); held > 0 {
		fmt.Fprintf(w, "  %d %s held for review, not sent: airlock actions %s lists them; airlock apply sends the ones you approve\n", held, plural(held, "request to an API was", "requests to APIs were"), id)
	}
}

// heldThisRound counts the actions the run's round held.
func heldThisRound(res *pipeline.RunResult) int {
	as, err := res.Sandbox.Actions()
	if err != nil {
		return 0
	}
	n := 0
	for _, a := range as {
		if a.Round == max(res.Meta.Round, 1) {
			n++
		}
	}
	return n
}

func describeStats(c *sandbox.ChangeStats) string {
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(c.Modified, "modified")
	add(c.Added, "added")
	add(c.Deleted, "deleted")
	add(c.Renamed, "renamed")
	add(c.ModeChanged, "mode changed")
	add(c.TypeChanged, "type changed")
	files := "files"
	if c.Files == 1 {
		files = "file"
	}
	return fmt.Sprintf("%d %s changed: %s", c.Files, files, strings.Join(parts, ", "))
}
