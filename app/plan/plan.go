// Package plan turns what a person asked for (a project, agent presets or
// a command, a prompt, an image, flags or a dialog's fields, a reply
// message) into the complete, validated plan of a run: every attempt's
// pipeline.RunOptions with its environment, network policy and secrets,
// image, limits (Airlock's defaults, the user's config.toml, the
// project's airlock.toml narrowing only, the request's own; with the
// trust rules), sync mode and verify command. airlock run, reply,
// fan-out and exec, the desktop app's run dialog and its Send back all
// plan through a Planner, and nothing else builds a run. It must not
// import fyne, app/cli, app/gui, vm/qemu or vm/vz: the hypervisor backend
// is handed in.
package plan

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/app/agent"
	"github.com/airlock-dev/airlock/app/agent/fakemodel"
	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/login"
	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// Planner plans runs on this host. Its fields are what every plan takes
// from outside the request; the user's files are read at every plan, so
// a long-running app sees an edited config.toml.
type Planner struct {
	// Home is Airlock's state directory.
	Home string
	// ImageRoots are read-only places with built images, after Home (the
	// app bundle's).
	ImageRoots []string
	// UserConfig is the path of the user's config.toml ("" for none).
	UserConfig string
	// Agents loads the agent presets (the built-ins and the user's
	// agents.toml); nil offers the built-ins only.
	Agents func() (map[string]agent.Preset, error)
	// Backend is the hypervisor a run's machine starts on, given how long
	// a finished machine may stay up unused (its idle TTL).
	Backend func(idleTTL time.Duration) (vm.Backend, error)
	// Getenv looks secrets up in the environment; nil means none there.
	Getenv func(string) string
	// HostCPUs clamps the CPUs asked for; zero does not clamp.
	HostCPUs int
	// HostMemory refuses memory asked for past it (bytes; HostMemory()
	// gives the host's); zero does not check.
	HostMemory int64
	// Arch is the guest architecture when a request names none; empty
	// means the host's.
	Arch string
	// Note receives, for people, what planning decided that they should
	// know (a limit ignored, a project confirmed, the demo model's
	// address); nil discards.
	Note func(string)
	// OnRequest receives every request of every planned run's egress
	// proxy as it ends; nil discards.
	OnRequest func(egress.Record)
	// BuildOutput receives the output of an environment's setup steps
	// when a run builds it; nil keeps it in the build's record only.
	BuildOutput io.Writer
	// AgentsRepo is where the published agent image is pulled from
	// (empty: images.AgentsRepo).
	AgentsRepo string
	// SendDial and SendRootCAs replace the host's DNS and roots for the
	// actions an apply sends (tests; Sender).
	SendDial    func(ctx context.Context, network, addr string) (net.Conn, error)
	SendRootCAs *x509.CertPool
	// BuildDial and BuildRootCAs replace the host's DNS and roots for
	// builder VMs' networks, and DockerBuilderBase the image Dockerfiles
	// are built on (tests; images.Source).
	BuildDial         func(ctx context.Context, network, addr string) (net.Conn, error)
	BuildRootCAs      *x509.CertPool
	DockerBuilderBase string

	imagesOnce sync.Once
	src        *images.Source // see Images
}

// Request is what a person asked for. Zero fields are not given: the
// configuration decides.
type Request struct {
	// Project is the project directory (a reply's is its sandbox's).
	Project string
	// Agents are agent presets to run, each an attempt (or FanOut
	// attempts); none runs Command or Script.
	Agents []string
	// Prompt is the agents' task. Without one an agent runs its
	// interactive command (a terminal session). A command or script gets
	// it as $AIRLOCK_PROMPT.
	Prompt string
	// Command is the argv run in /workspace; with Script, the script's
	// arguments.
	Command []string
	// Script, when set, is a POSIX shell script run with sh in the guest;
	// ScriptName is its name for people.
	Script     []byte
	ScriptName string
	// Image is the guest image; empty means the agent preset's, else
	// minimal.
	Image string
	// Arch is the guest architecture; empty means the Planner's.
	Arch string
	// Env is added to the command's environment, over a preset's.
	Env map[string]string
	// Sync is how the project reaches the VM (sandbox.SyncMode); empty
	// means disk (copy without a workspace disk).
	Sync string
	// Limits are the request's own limits (flags, dialog fields); zero
	// fields are not given.
	Limits config.Limits
	// OpenNetwork asks for an unprotected network device.
	OpenNetwork bool
	// Allow are HOST[:PORT] rules added to the network's allow-list.
	Allow []string
	// TrustProject confirms what the project's airlock.toml asks beyond
	// the user's configuration (recorded in trust.json).
	TrustProject bool
	// Verify replaces the project's verify command; NoVerify skips it.
	Verify   string
	NoVerify bool
	// NoCache gives the run no dependency caches (see pipeline.CacheEnv).
	NoCache bool
	// FreshCache starts the run with empty dependency caches, not the
	// project's kept ones (pipeline.RunSpec.FreshCache).
	FreshCache bool
	// Docker adds Docker inside the VM to the project's environment
	// (images.EnvironmentRequest.Docker).
	Docker bool
	// Progress, if set, also receives what planning does that takes a
	// while (the project's environment pulled or built), as it happens.
	Progress func(string)
	// Keep leaves the VM running after the run.
	Keep bool
	// FanOut runs every agent (or the command) this many times; zero
	// means once.
	FanOut int
	// Parallel bounds how many attempts run at once; zero means as many
	// as half the host's available memory holds.
	Parallel int
	// Link, BootTimeout and Cold are how the machine boots (the guest
	// link, when to give up, no warm snapshot).
	Link        vm.LinkKind
	BootTimeout time.Duration
	Cold        bool
	// Reply, when set, is a sandbox to send back to its agent with
	// Message: the plan is its next round.
	Reply   string
	Message string
	// Origin says what asked for the run when a person did not (an MCP
	// tool call); it is kept with each sandbox and in its audit log.
	Origin *sandbox.Origin
}

// Plan is a complete run, every decision taken: the executor's Job
// (one RunOptions per attempt, the reply round it is, how many attempts
// at once), ready for pipeline.Execute once the caller has added how
// each run shows its progress and output (Progress, Stdout, Stderr,
// Stdin, TTY).
type Plan struct {
	pipeline.Job
	// Project is the project's absolute path.
	Project string
	// Limits are the effective limits, every field set.
	Limits config.Limits
	// OpenNetwork gives the VMs an unprotected network device (and no
	// proxy).
	OpenNetwork bool
	// Environment is the project's environment the runs use, nil for
	// none.
	Environment *images.Environment

	closers []func()
}

// Close releases what the plan started for its runs (the demo agent's
// fake model). It is idempotent.
func (p *Plan) Close() {
	for _, c := range slices.Backward(p.closers) {
		c()
	}
	p.closers = nil
}

// UntrustedError is a project's airlock.toml asking for more network
// access than the user allows, not yet confirmed.
type UntrustedError struct {
	// Project is the project's directory; Asks what its file widens.
	Project string
	Asks    []string
}

func (e *UntrustedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s asks for more network access than you allow:\n", filepath.Join(e.Project, config.FileName))
	for _, a := range e.Asks {
		fmt.Fprintf(&b, "  %s\n", a)
	}
	b.WriteString("A project's configuration is untrusted input (it comes with the repository), so Airlock widens nothing\n")
	b.WriteString("until you confirm this exact file. Nothing was run. To confirm it:\n")
	fmt.Fprintf(&b, "  airlock trust %s\n", e.Project)
	b.WriteString("Changing the file needs a new confirmation.")
	return b.String()
}

// ErrNoBackend is a Planner that cannot boot machines (a build without
// a hypervisor).
var ErrNoBackend = errors.New("this build of airlock cannot boot machines")

// Run plans a run (or, with Request.Reply, a reply round): every
// decision about it is taken here, once, in named steps, and the plan
// says all of it. The images the runs boot are fetched while planning
// (a pull or a build, reported through Note and Request.Progress). The
// plan must be closed once its runs are over.
func (pl *Planner) Run(ctx context.Context, req Request) (_ *Plan, err error) {
	if pl.Backend == nil {
		return nil, ErrNoBackend
	}
	p := &Plan{Job: pipeline.Job{Reply: req.Reply, Message: req.Message}}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	var meta *sandbox.Meta
	if req.Reply != "" {
		if meta, p.Round, err = pl.reply(ctx, &req); err != nil {
			return nil, err
		}
	}
	if p.Project, err = images.ProjectDir(req.Project); err != nil {
		return nil, err
	}
	fanOut, err := attempts(req)
	if err != nil {
		return nil, err
	}
	user, err := pl.user()
	if err != nil {
		return nil, err
	}
	proj, err := config.Load(p.Project)
	if err != nil {
		return nil, err
	}
	eff, err := pl.limits(user, proj, req.Limits, req.OpenNetwork)
	if err != nil {
		return nil, err
	}
	p.Limits, p.OpenNetwork = eff.Limits, eff.OpenNetwork
	backend, err := pl.Backend(eff.Limits.IdleTTL.Std())
	if err != nil {
		return nil, err
	}
	presets, err := pl.presets(req.Agents)
	if err != nil {
		return nil, err
	}
	// An agent that cannot sign in stops the run now, before anything is
	// pulled, built or booted. On an open network nothing is injected.
	signed := map[string]*signedIn{}
	if !eff.OpenNetwork {
		for _, ps := range presets {
			if signed[ps.Name], err = pl.signIn(user, ps); err != nil {
				return nil, err
			}
		}
	}
	base, err := pl.baseRun(p, req, proj, meta)
	if err != nil {
		return nil, err
	}
	progress := func(s string) {
		pl.note("%s", s)
		if req.Progress != nil {
			req.Progress(s)
		}
	}
	if req.Image == "" && meta == nil {
		if p.Environment, err = pl.environment(ctx, p.Project, req, presets, progress); err != nil {
			return nil, err
		}
	}
	variants, err := pl.variants(ctx, p, req, user, proj, base, presets, signed)
	if err != nil {
		return nil, err
	}
	svc, err := services(p.Environment, meta)
	if err != nil {
		return nil, err
	}
	for i := range variants {
		if err := pl.machine(ctx, &variants[i], req, p, eff, backend, progress); err != nil {
			return nil, err
		}
		if meta != nil {
			// A reply round starts as its sandbox's first round did.
			variants[i].Start, variants[i].Hosts = meta.Start, meta.Hosts
		}
		variants[i].Services = svc
	}
	if eff.OpenNetwork {
		for _, ps := range presets {
			if len(ps.Secret) > 0 {
				pl.note("open network: no proxy, so agent %s gets no API key from Airlock (set it with --env)", ps.Name)
			}
		}
	}
	for _, v := range variants {
		for range fanOut {
			p.Runs = append(p.Runs, v)
		}
	}
	p.Parallel = Parallel(req.Parallel, len(p.Runs), eff.Limits)
	return p, nil
}

// variants are the plan's attempts before the fan-out: one per agent
// preset (its command, environment and network; the demo agent's fake
// model started for the plan's life), or the request's command.
func (pl *Planner) variants(ctx context.Context, p *Plan, req Request, user config.User, proj config.Project, base pipeline.RunOptions, presets []agent.Preset, signed map[string]*signedIn) ([]pipeline.RunOptions, error) {
	var out []pipeline.RunOptions
	for _, ps := range presets {
		if ps.Name == demoAgent {
			stop, err := pl.startFakeModel(&ps)
			if err != nil {
				return nil, err
			}
			p.closers = append(p.closers, stop)
		}
		o, err := pl.agentRun(base, ps, req)
		if err != nil {
			return nil, err
		}
		if o.Network, err = pl.network(ctx, user, proj, p, &ps, signed[ps.Name], req); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if len(presets) > 0 {
		return out, nil
	}
	o := base
	o.Command, o.Env, o.Prompt = req.Command, maps.Clone(req.Env), req.Prompt
	if req.Prompt != "" {
		o.Env = withEnv(o.Env, "AIRLOCK_PROMPT", req.Prompt)
	}
	var err error
	if o.Network, err = pl.network(ctx, user, proj, p, nil, nil, req); err != nil {
		return nil, err
	}
	return append(out, o), nil
}

// attempts is how many times each agent (or the command) runs, within
// the bound on a fan-out; a kept VM is one attempt's.
func attempts(req Request) (fanOut int, _ error) {
	fanOut = max(req.FanOut, 1)
	n := fanOut * max(len(req.Agents), 1)
	if n > pipeline.MaxFanOut {
		if len(req.Agents) > 1 {
			return 0, fmt.Errorf("%d agents × %d attempts each: at most %d attempts in all", len(req.Agents), fanOut, pipeline.MaxFanOut)
		}
		return 0, fmt.Errorf("%d attempts: give 1 to %d", fanOut, pipeline.MaxFanOut)
	}
	if req.Keep && n > 1 {
		return 0, errors.New("a kept VM and several attempts do not go together: keep one sandbox's VM at a time")
	}
	return fanOut, nil
}

// baseRun is what every attempt of the plan shares: the project, the
// script, how the project gets in (the sync mode, decided here once),
// the limits, the verify step and the project's excludes. A reply round
// keeps its sandbox's sync mode and verify.
func (pl *Planner) baseRun(p *Plan, req Request, proj config.Project, meta *sandbox.Meta) (pipeline.RunOptions, error) {
	mode, err := sandbox.ParseSyncMode(cmp.Or(req.Sync, string(sandbox.SyncDisk)))
	if err != nil {
		return pipeline.RunOptions{}, fmt.Errorf("sync: %w", err)
	}
	if meta != nil {
		// The round's tree becomes a baseline disk of its own in the
		// disk mode; otherwise it is copied in.
		mode = sandbox.SyncCopy
		if meta.SyncMode == sandbox.SyncDisk {
			mode = sandbox.SyncDisk
		}
	}
	o := pipeline.RunOptions{RunSpec: pipeline.RunSpec{
		Project: p.Project, Script: req.Script, ScriptName: req.ScriptName, Arch: pl.arch(req.Arch), Sync: mode,
		Timeout: p.Limits.Timeout.Std(), Limits: ManifestLimits(p.Limits), OpenNetwork: p.OpenNetwork,
		Resources: &p.Limits, Verify: req.Verify, Keep: req.Keep, Excludes: proj.Exclude, Origin: req.Origin,
		BaseDisks: home.Layout{Root: pl.Home}.BaseDisks(),
	}}
	if p.Limits.Disk > 0 {
		o.DiskSize = int64(p.Limits.Disk)
	}
	if o.Sync == sandbox.SyncDisk && o.DiskSize <= 0 {
		// The overlay's upper layer needs a disk of its own.
		o.Sync = sandbox.SyncCopy
	}
	if o.Keep && (o.Sync == sandbox.SyncVirtiofs || o.DiskSize <= 0) {
		return o, errors.New("keep: a kept VM needs the copy or disk sync mode with a workspace disk (a machine with a virtio-fs share cannot be checkpointed)")
	}
	switch {
	case req.NoVerify:
		o.Verify = ""
	case o.Verify == "" && meta != nil && meta.Verify != nil:
		o.Verify = meta.Verify.Command
	case o.Verify == "":
		o.Verify = proj.Verify
	}
	return o, nil
}

// environment is the project's environment the plan's runs use, built
// once (in a VM) when it is not yet; nil for a project without one.
func (pl *Planner) environment(ctx context.Context, project string, req Request, presets []agent.Preset, progress func(string)) (*images.Environment, error) {
	withAgents := false
	for _, ps := range presets {
		withAgents = withAgents || needsAgentCLIs(ps.Image)
	}
	env, err := pl.Images().Environment(ctx, images.EnvironmentRequest{Project: project, Arch: req.Arch, TrustProject: req.TrustProject,
		Progress: progress, Output: pl.BuildOutput, WithAgents: withAgents, Docker: req.Docker, Allow: req.Allow})
	if err == nil && env != nil {
		pl.note("environment: %s, image %s", env.Source, env.Image)
	}
	return env, err
}

// machine decides what attempt o boots: its image (the request's, else
// the environment's or the agent preset's, else the minimal one),
// fetched now if it must be; the variables of the caches and the image;
// the uid its baseline disk is owned by; and how it boots.
func (pl *Planner) machine(ctx context.Context, o *pipeline.RunOptions, req Request, p *Plan, eff config.Effective, backend vm.Backend, progress func(string)) error {
	if req.Image != "" {
		o.Image = req.Image
	}
	if env := p.Environment; env != nil {
		// An agent whose CLI is on the agent image runs on the
		// environment with the agent layer on top (or on the environment
		// itself when it builds on the agent image).
		switch {
		case !needsAgentCLIs(o.Image) || (env.Environment.Image == "" && env.Environment.Build == nil):
			o.Image = env.Image
		case env.AgentsImage != "":
			o.Image = env.AgentsImage
		default:
			pl.note("the environment's image %s lacks the agent CLIs, so the agent runs on its own image %s", env.Image, o.Image)
		}
		o.Env = withEnvs(env.Env, o.Env)
		if env.User != "" && o.User == "" {
			o.User = env.User
		}
		o.Start, o.Hosts = startSteps(env.Environment)
	}
	// Docker in the environment, or asked for on an image of the user's
	// (--image) or of a reply's sandbox: the engine is started before
	// the command, and an image without one says so there.
	o.Docker = req.Docker || (p.Environment != nil && p.Environment.Docker)
	if o.Docker && o.Network != nil && o.Network.Policy != nil {
		pl.registrySignIns(o.Network.Policy)
	}
	if o.Image == "" {
		o.Image = "minimal"
	}
	// The agent presets' CLIs are on the full image (built on Linux, as
	// root) and on the agent image (pulled, or built anywhere): either
	// does; without both, the agent image is fetched now.
	if req.Image == "" && o.Image == image.FullName && pl.CheckImage(image.FullName, o.Arch) != nil {
		o.Image = images.AgentsImage
	}
	im, err := pl.image(ctx, o.Image, o.Arch, progress)
	if err != nil {
		return err
	}
	// Under the run's own variables: the caches', then the image's (an
	// OCI image's configuration: its PATH, its toolchain's).
	if !req.NoCache {
		o.Cache = filepath.Join(home.Layout{Root: pl.Home}.Caches(), projectKey(p.Project), pipeline.CacheFile)
		o.FreshCache = req.FreshCache
		o.Env = pipeline.WithCacheEnv(o.Env)
	}
	if im.Meta.OCI != nil {
		o.Env = withEnvs(imageEnv(im.Meta.OCI.Config.Env), o.Env)
	}
	if o.Sync == sandbox.SyncDisk {
		user := cmp.Or(o.User, im.User())
		uid, gid, ok := im.Owner(user)
		if ok {
			o.Owner = pipeline.Owner{UID: uid, GID: gid}
		} else {
			// An image made before Airlock recorded its users' uids:
			// copy, and chown in the guest.
			pl.note("copying the project in: the image %s does not record the uid of %s that a baseline disk needs (build or pull it again to start faster)", o.Image, cmp.Or(user, "its default user"))
			o.Sync = sandbox.SyncCopy
		}
	}
	o.Boot = pipeline.LaunchBoot(pl.launchOptions(req, eff, backend, o.Image, o.Arch))
	return nil
}

// image is image name for arch, fetched first when it is the agent
// image and not here yet.
func (pl *Planner) image(ctx context.Context, name, arch string, progress func(string)) (*image.Image, error) {
	if name == images.AgentsImage {
		if err := pl.Images().EnsureAgents(ctx, arch, progress); err != nil {
			return nil, err
		}
	}
	im, err := pl.Images().Find(name, arch)
	if err != nil && name == image.FullName && errors.Is(err, image.ErrNotFound) {
		return nil, fmt.Errorf("the agent CLIs need the agent image; build it with `airlock image build agents` (any host, no root; minutes, once), or the full image on Linux with `sudo airlock image build full`: %w", err)
	}
	return im, err
}

// needsAgentCLIs says whether an agent preset's image is there for the
// agent CLIs on it (the full image or the agent image).
func needsAgentCLIs(img string) bool { return img == image.FullName || img == images.AgentsImage }

// imageEnv is an OCI image configuration's KEY=VALUE list as a map.
func imageEnv(kvs []string) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// projectKey names a project's directory under the home's caches/.
func projectKey(project string) string {
	sum := sha256.Sum256([]byte(project))
	return hex.EncodeToString(sum[:8])
}

// withEnvs is base with over on top, as a new map (nil when both are empty).
func withEnvs(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return over
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}

// reply fills req from the sandbox it replies to: its project, image
// and architecture (unless the request names them), and for an agent
// preset its continue command on the reply prompt, else the first
// round's command or script.
func (pl *Planner) reply(ctx context.Context, req *Request) (*sandbox.Meta, *sandbox.Reply, error) {
	if strings.TrimSpace(req.Message) == "" {
		return nil, nil, errors.New("reply: say what the agent should do differently")
	}
	store, err := sandbox.Open(pl.Home)
	if err != nil {
		return nil, nil, err
	}
	store.HostExec = pl.HostExec
	sb, err := store.Get(req.Reply)
	if err != nil {
		return nil, nil, err
	}
	m, err := sb.Meta()
	if err != nil {
		return nil, nil, err
	}
	req.Reply, req.Project = sb.ID, m.Project
	if req.Image == "" {
		req.Image = m.Image
	}
	req.Docker = req.Docker || m.Docker
	if req.Arch == "" {
		req.Arch = m.Arch
	}
	if m.SyncMode == sandbox.SyncVirtiofs {
		return nil, nil, fmt.Errorf("reply to %s: a virtiofs sandbox cannot be continued yet; start a new run", sb.ID)
	}
	round, err := sb.PrepareReply(ctx, req.Message)
	if err != nil {
		return nil, nil, err
	}
	req.Agents, req.Prompt, req.FanOut, req.Keep = nil, "", 1, false
	if m.Agent != "" {
		req.Agents, req.Prompt = []string{m.Agent}, round.Prompt
		return &m, round, nil
	}
	if len(req.Command) > 0 || req.Script != nil {
		return &m, round, nil
	}
	// The same command as the first round, told about the reply by its
	// environment (AIRLOCK_REPLY).
	req.Command = m.Command
	if m.ScriptName != "" {
		if req.Script, err = os.ReadFile(sb.Path(sandbox.ScriptFile)); err != nil {
			return nil, nil, fmt.Errorf("reply: the first round's script: %w", err)
		}
		req.ScriptName = m.ScriptName
	}
	return &m, round, nil
}

// agentRun is base run by the agent preset ps: its command on the
// request's prompt (its continue command for a reply, its interactive
// one without a prompt), its environment under the request's, its user,
// image and final message.
func (pl *Planner) agentRun(base pipeline.RunOptions, ps agent.Preset, req Request) (pipeline.RunOptions, error) {
	o := base
	switch {
	case req.Reply != "":
		o.Command = ps.ContinueCommand(req.Prompt)
	case req.Prompt == "" && len(ps.Interactive) == 0:
		return o, fmt.Errorf("agent %s has no interactive command: give it a prompt", ps.Name)
	default:
		o.Command = ps.Command(req.Prompt, req.Prompt == "")
	}
	o.Env = maps.Clone(ps.Env)
	for k, v := range req.Env {
		o.Env = withEnv(o.Env, k, v)
	}
	o.Agent, o.User, o.Image = ps.Name, ps.User, ps.Image
	if req.Reply == "" {
		o.Prompt = req.Prompt // a reply's prompt is Airlock's, not the user's
	}
	if ps.Rationale.JSONField != "" && (req.Prompt != "" || req.Reply != "") {
		o.FinalMessage = ps.FinalMessage
	}
	return o, nil
}

func withEnv(env map[string]string, k, v string) map[string]string {
	if env == nil {
		env = map[string]string{}
	}
	env[k] = v
	return env
}

// presets looks the named agent presets up.
func (pl *Planner) presets(names []string) ([]agent.Preset, error) {
	if len(names) == 0 {
		return nil, nil
	}
	all, err := pl.loadAgents()
	if err != nil {
		return nil, err
	}
	out := make([]agent.Preset, 0, len(names))
	for _, name := range names {
		p, ok := all[name]
		if !ok {
			return nil, fmt.Errorf("no agent %q: known agents are %s (add your own in %s next to config.toml)", name, strings.Join(agent.Names(all), ", "), agent.FileName)
		}
		if slices.ContainsFunc(out, func(q agent.Preset) bool { return q.Name == name }) {
			return nil, fmt.Errorf("agent %s is asked for twice: for several attempts of one agent, fan out", name)
		}
		out = append(out, p)
	}
	return out, nil
}

func (pl *Planner) loadAgents() (map[string]agent.Preset, error) {
	if pl.Agents == nil {
		return agent.Load("")
	}
	return pl.Agents()
}

// user loads the user's config.toml.
func (pl *Planner) user() (config.User, error) {
	if pl.UserConfig == "" {
		return config.User{}, nil
	}
	return config.LoadUser(pl.UserConfig)
}

// HostExec returns the user's [review] host_exec patterns: files that
// run on their machine, added to the built-in list (see
// sandbox.Store.HostExec).
func (pl *Planner) HostExec() ([]string, error) {
	u, err := pl.user()
	return u.Review.HostExec, err
}

// Limits are the effective limits of a run on project ("" for none)
// with the request's own limits flags.
func (pl *Planner) Limits(project string, flags config.Limits) (config.Effective, error) {
	user, err := pl.user()
	if err != nil {
		return config.Effective{}, err
	}
	var proj config.Project
	if project != "" {
		if proj, err = config.Load(project); err != nil {
			return config.Effective{}, err
		}
	}
	return pl.limits(user, proj, flags, false)
}

// limits merges Airlock's defaults, the user's file, the project's file
// (which may only narrow) and the request's limits, and notes what was
// ignored.
func (pl *Planner) limits(user config.User, proj config.Project, flags config.Limits, open bool) (config.Effective, error) {
	eff, err := config.Resolve(config.Sources{User: user, Project: proj, Flags: flags, OpenNetworkFlag: open, HostCPUs: pl.HostCPUs, HostMemory: pl.HostMemory})
	if err != nil {
		return config.Effective{}, err
	}
	for _, n := range eff.Notes {
		pl.note("%s", n)
	}
	return eff, nil
}

// network is a run's way out: the user's configuration, the request's
// allow rules, the agent preset's hosts and API keys, and the project's
// airlock.toml (what it widens only once the user confirmed that exact
// file). An open network has none: nothing is proxied.
func (pl *Planner) network(ctx context.Context, user config.User, proj config.Project, p *Plan, ps *agent.Preset, si *signedIn, req Request) (*pipeline.Network, error) {
	if p.OpenNetwork {
		return nil, nil
	}
	flags, err := AllowRules(req.Allow)
	if err != nil {
		return nil, err
	}
	var l login.Login
	in := config.PolicyInput{User: user, Project: proj, Flags: flags, Lookup: func(name string) (string, error) {
		if si != nil {
			if v, ok := si.values[name]; ok {
				return v, nil // looked up when the plan checked the sign-in
			}
		}
		v, _, err := egress.LookupSecret(name, user.Secrets, pl.getenv)
		return v, err
	}}
	if ps != nil {
		if in.Preset, err = ps.Rules(); err != nil {
			return nil, err
		}
		if si != nil {
			in.PresetSecrets, l = si.secrets, si.login
		}
	}
	if in.ProjectTrusted, err = pl.trusted(p.Project, user, proj, flags, req.TrustProject); err != nil {
		return nil, err
	}
	pol, err := config.Policy(in)
	if err != nil {
		return nil, err
	}
	n := &pipeline.Network{Policy: pol, OnRequest: pl.OnRequest}
	if l != nil {
		// A subscription's sign-in: refreshed here if it would end
		// within the run's time limit; its tokens go in as placeholders.
		g, err := l.Grant(ctx, pl.loginEnv(), p.Limits.Timeout.Std())
		if err != nil {
			return nil, fmt.Errorf("agent %s: sign in with the %s login: %w", ps.Name, l.Name(), err)
		}
		rules, err := AllowRules(g.Allow)
		if err != nil {
			return nil, fmt.Errorf("agent %s: the %s login: %w", ps.Name, l.Name(), err)
		}
		for i := range rules {
			rules[i].Source = "login"
		}
		pol.Allow = append(pol.Allow, rules...)
		pol.Secrets = append(pol.Secrets, g.Secrets...)
		if err := pol.Validate(); err != nil {
			return nil, fmt.Errorf("agent %s: the %s login: %w", ps.Name, l.Name(), err)
		}
		n.Env, n.Files = g.Env, g.Files
		pl.note("agent %s signs in with the %s login; its tokens stay on this computer", ps.Name, l.Name())
	}
	return n, nil
}

// registrySignIns gives pol the host's Docker sign-ins for the registries
// it lets the proxy look into (images.RunRegistryCredentials), once (the
// attempts of a fan-out share their variant's policy), and says so.
func (pl *Planner) registrySignIns(pol *egress.Policy) {
	for _, c := range images.RunRegistryCredentials(pol) {
		if slices.ContainsFunc(pol.Credentials, func(have egress.Credential) bool { return have.Name == c.Name }) {
			continue
		}
		pol.Credentials = append(pol.Credentials, c)
		pl.note("Docker's pulls from %s sign in as you (the host's Docker configuration); the proxy adds the sign-in, which never enters the VM", strings.Join(c.Hosts, " and "))
	}
}

// trusted says whether what the project's file widens counts: nothing
// to widen, a confirmed file, or a confirmation given now (recorded).
func (pl *Planner) trusted(project string, user config.User, proj config.Project, flags []egress.Rule, confirm bool) (bool, error) {
	asks := config.Widening(user.Network, proj.Network, flags)
	if len(asks) == 0 {
		return false, nil
	}
	trust := config.Trust{Path: home.Layout{Root: pl.Home}.TrustFile()}
	ok, err := trust.Trusted(project, proj.SHA256)
	if err != nil {
		return false, err
	}
	if ok {
		return true, nil
	}
	if !confirm {
		return false, &UntrustedError{Project: project, Asks: asks}
	}
	if err := trust.Confirm(project, proj.SHA256); err != nil {
		return false, err
	}
	pl.note("confirmed %s (SHA-256 %s): %s", filepath.Join(project, config.FileName), proj.SHA256[:12], strings.Join(asks, "; "))
	return true, nil
}

// AllowRules parses allow rules given by a person: HOST[:PORT], with
// methods or not, and registry presets ("@npm", egress.ParseRules).
func AllowRules(allow []string) ([]egress.Rule, error) {
	var out []egress.Rule
	for _, a := range allow {
		rs, err := egress.ParseRules(a)
		if err != nil {
			return nil, fmt.Errorf("allow %s: %w", a, err)
		}
		for _, r := range rs {
			r.Source = "flag"
			out = append(out, r)
		}
	}
	return out, nil
}

// launchOptions is how a run's machine boots: the image, sized by the
// effective limits, on backend.
func (pl *Planner) launchOptions(req Request, eff config.Effective, backend vm.Backend, img, arch string) launch.Options {
	o := launch.Options{
		Home: pl.Home, ImageRoots: pl.ImageRoots, Image: img, Arch: vm.Arch(arch),
		CPUs: eff.Limits.CPUs, MemoryMiB: eff.Limits.Memory.MiB(),
		Link: req.Link, Network: vm.NetworkNone, Backend: backend, BootTimeout: req.BootTimeout,
		Progress: func(launch.Event) {}, Warm: !req.Cold, Notice: func(s string) { pl.note("%s", s) },
	}
	if o.BootTimeout <= 0 {
		o.BootTimeout = launch.DefaultBootTimeout
	}
	if eff.OpenNetwork {
		o.Network = vm.NetworkNAT
	}
	return o
}

// CheckImage says why image name cannot boot here for arch (empty: the
// Planner's), or nil.
func (pl *Planner) CheckImage(name, arch string) error {
	_, err := pl.Images().Find(name, arch)
	return err
}

func (pl *Planner) arch(a string) string { return pl.Images().GuestArch(a) }

func (pl *Planner) getenv(k string) string {
	if pl.Getenv == nil {
		return ""
	}
	return pl.Getenv(k)
}

func (pl *Planner) note(format string, args ...any) {
	if pl.Note != nil {
		pl.Note(fmt.Sprintf(format, args...))
	}
}

// demoAgent is the agent preset whose model is Airlock's own fake one.
const demoAgent = "demo"

// startFakeModel starts the demo agent's fake model on the host's
// loopback for one run, allows exactly its address through the run's
// proxy (as one of the preset's hosts), and tells the agent where it is
// (AIRLOCK_DEMO_API). It returns what stops the model.
func (pl *Planner) startFakeModel(ps *agent.Preset) (stop func(), err error) {
	srv, err := fakemodel.Start()
	if err != nil {
		return nil, fmt.Errorf("demo agent: start its fake model: %w", err)
	}
	ps.Hosts = append(slices.Clone(ps.Hosts), srv.Addr)
	ps.Env = withEnv(maps.Clone(ps.Env), "AIRLOCK_DEMO_API", srv.URL)
	pl.note("demo agent: its fake model listens on %s (no API key needed)", srv.Addr)
	return func() { srv.Close() }, nil
}

// ManifestLimits are the caps of l as the collect step takes them.
func ManifestLimits(l config.Limits) manifest.Limits {
	return manifest.Limits{MaxTotalBytes: int64(l.MaxPullBytes), MaxEntries: l.MaxFiles, MaxFileSize: int64(l.MaxFileSize)}
}

// Parallel is how many of n attempts run at once: flag when given, else
// as many VMs as half the host's available memory holds (at least one),
// never more than there are attempts.
func Parallel(flag, n int, lim config.Limits) int {
	if flag > 0 {
		return min(flag, n)
	}
	avail := availableMemory()
	if avail <= 0 || lim.Memory <= 0 {
		return n
	}
	return max(1, min(n, int(avail/2/int64(lim.Memory))))
}

// availableMemory reads MemAvailable from /proc/meminfo (Linux); 0 when
// it cannot tell (macOS: the attempts all start, vz clamps memory).
func availableMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		var kb int64
		if _, err := fmt.Sscanf(line, "MemAvailable: %d kB", &kb); err == nil {
			return kb * 1024
		}
	}
	return 0
}
