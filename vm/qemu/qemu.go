// Package qemu is the QEMU backend of package vm: it turns a vm.Spec into a
// qemu-system-x86_64 or qemu-system-aarch64 command line (Args, a pure
// function), chooses between KVM and TCG (ChooseAccel, with a cached probe
// boot where KVM is present but untrusted), and runs QEMU as a child process
// it controls over QMP, exposing the guest link as vsock or a virtio-serial
// port bound to a unix socket.
//
// It imports only vm and libraries. It must not import the guest packages
// (guest, guest/agent, guest/client), app, sync, review, fyne or vz: the
// names it shares with the guest (SerialPortName, ProbeMarker, ProbeCmdline)
// are constants here that must equal the guest package's; a test in a
// package allowed to import both should check that they do.
package qemu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/vm"
)

// Config configures a Backend. The zero value is ready to use: QEMU from
// $PATH, firmware from /usr/share/qemu, accelerator chosen per host, no
// probe cache, notices to the logger, and a logger that discards.
type Config struct {
	// QEMUDir is the directory holding qemu-system-*; empty searches $PATH.
	QEMUDir string
	// FirmwareDir is where qboot.rom is looked for; empty means
	// /usr/share/qemu.
	FirmwareDir string
	// Accel forces an accelerator (KVM or TCG); AccelAuto chooses.
	Accel Accel
	// CacheDir keeps KVM probe verdicts so the probe boot runs once per
	// QEMU version, host kernel and guest kernel. Empty means no cache.
	CacheDir string
	// ProbeTimeout bounds a KVM probe boot; zero means 10 seconds.
	ProbeTimeout time.Duration
	// Probe runs a KVM probe boot; nil means booting spec for real.
	Probe ProbeFunc
	// Notice receives the one line said when a machine runs under TCG;
	// nil means Logger at warning level.
	Notice func(string)
	// Virtiofsd is the virtiofsd program serving Spec.Shares; empty means
	// DefaultVirtiofsd.
	Virtiofsd string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// ConfineProcess has the calling process confine itself, with
	// Landlock, to what its machine needs (Confinement) just before
	// QEMU starts, QEMU with it. Only a process that runs one machine
	// and nothing else may set it: a VM's supervisor. It cannot be
	// undone.
	ConfineProcess bool
}

// DefaultProbeTimeout bounds a probe boot when Config.ProbeTimeout is zero.
const DefaultProbeTimeout = 10 * time.Second

// Backend runs machines under QEMU. Create it with New.
type Backend struct {
	cfg  Config
	log  *slog.Logger
	root string // host filesystem root for probes; "/" except in tests
	// probeAccel is what probe boots run under: KVM, except in tests of the
	// probe's mechanics.
	probeAccel Accel

	mu       sync.Mutex
	versions map[string]string // program path -> version line
	noticed  map[string]bool   // notices already given
}

var (
	_ vm.Backend   = (*Backend)(nil)
	_ vm.Describer = (*Backend)(nil)
	_ vm.Restorer  = (*Backend)(nil)
)

// New returns a Backend. It starts nothing.
func New(cfg Config) *Backend {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.FirmwareDir == "" {
		cfg.FirmwareDir = "/usr/share/qemu"
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	return &Backend{cfg: cfg, log: log, root: "/", probeAccel: KVM, versions: map[string]string{}, noticed: map[string]bool{}}
}

// Name is "qemu".
func (b *Backend) Name() string { return "qemu" }

func hostArch() vm.Arch { return vm.Arch(runtime.GOARCH) }

// program finds the QEMU program for arch, or says how to install it.
func (b *Backend) program(arch vm.Arch) (string, error) {
	name, err := Binary(arch)
	if err != nil {
		return "", err
	}
	var path string
	if b.cfg.QEMUDir != "" {
		path = filepath.Join(b.cfg.QEMUDir, name)
		var fi os.FileInfo
		if fi, err = os.Stat(path); err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
			err = errors.New("not an executable file")
		}
	} else {
		path, err = exec.LookPath(name)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w: %w; install it with `sudo apt-get install %s` (Debian, Ubuntu)",
			name, vm.ErrHypervisorMissing, err, aptPackage(arch))
	}
	return path, nil
}

// Validate checks spec against QEMU and this host without starting
// anything, reporting every problem at once.
func (b *Backend) Validate(ctx context.Context, spec vm.Spec) error {
	return b.validate(spec.WithDefaults(hostArch()), spec)
}

func (b *Backend) validate(spec, raw vm.Spec) error {
	specErr := raw.Validate()
	errs := []error{specErr}
	if _, err := Binary(spec.Arch); err == nil {
		if _, err := b.program(spec.Arch); err != nil {
			errs = append(errs, err)
		}
	} else if raw.Arch == "" { // else raw.Validate said it
		errs = append(errs, err)
	}
	file := func(what, path string) {
		if path == "" {
			return
		}
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		case !fi.Mode().IsRegular():
			errs = append(errs, fmt.Errorf("%s %s is not a regular file", what, path))
		}
	}
	file("kernel", spec.Kernel)
	file("initrd", spec.Initrd)
	for i, d := range spec.Disks {
		file(fmt.Sprintf("disk %d", i), d.Path)
	}
	if spec.StateDir != "" {
		if fi, err := os.Stat(spec.StateDir); err != nil {
			errs = append(errs, fmt.Errorf("state dir: %w", err))
		} else if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("state dir %s is not a directory", spec.StateDir))
		}
		if err := checkSocketPath("qmp", QMPSocket(spec), runtime.GOOS); err != nil {
			errs = append(errs, err)
		}
	}
	if err := b.validateShares(spec); err != nil {
		errs = append(errs, err)
	}
	for i, sh := range spec.Shares {
		if spec.StateDir != "" {
			if err := checkSocketPath("virtiofs share "+sh.Tag, ShareSocket(spec, i), runtime.GOOS); err != nil {
				errs = append(errs, err)
			}
		}
	}
	host := Host{Vsock: hostVsock(b.root), OS: runtime.GOOS}
	switch link, err := ResolveLink(spec, host); {
	case err != nil && spec.Link.Kind == vm.LinkVsock: // else raw.Validate said it
		errs = append(errs, err)
	case link == vm.LinkVsock && spec.Link.Port == 0:
		errs = append(errs, errors.New("vsock link: no guest port (spec.Link.Port)"))
	case link == vm.LinkSerial && spec.StateDir != "":
		if err := checkSocketPath("serial link", LinkSocket(spec), runtime.GOOS); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// version is the first line of `prog --version`, cached per program.
func (b *Backend) version(ctx context.Context, prog string) (string, error) {
	b.mu.Lock()
	v, ok := b.versions[prog]
	b.mu.Unlock()
	if ok {
		return v, nil
	}
	out, err := exec.CommandContext(ctx, prog, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", prog, err)
	}
	v, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	b.mu.Lock()
	b.versions[prog] = v
	b.mu.Unlock()
	return v, nil
}

// probeKey identifies a probe verdict for spec.
//
// QEMU is named by its program file's identity, not by `--version`, which
// would cost every sandbox start a process.
func (b *Backend) probeKey(ctx context.Context, prog string, spec vm.Spec) (probeCacheKey, error) {
	k := probeCacheKey{QEMU: programIdentity(prog), HostKernel: kernelRelease(), Kernel: spec.Kernel, Initrd: spec.Initrd, Arch: spec.Arch}
	k.KernelSize, k.KernelModTime = fileIdentity(spec.Kernel)
	if spec.Initrd != "" {
		k.InitrdSize, k.InitrdModTime = fileIdentity(spec.Initrd)
	}
	return k, nil
}

// accel chooses the accelerator for spec, running (or recalling) a probe
// boot when KVM is present but its driver is not one stock kernels trust.
func (b *Backend) accel(ctx context.Context, prog string, spec vm.Spec) Choice {
	facts := hostKVMFacts(b.root, spec.Arch, hostArch())
	c := ChooseAccel(b.cfg.Accel, facts)
	if !c.NeedProbe {
		return c
	}
	key, err := b.probeKey(ctx, prog, spec)
	if err != nil {
		facts.Probe = &ProbeResult{Why: err.Error()}
		return ChooseAccel(b.cfg.Accel, facts)
	}
	res, ok := loadProbe(b.cfg.CacheDir, key)
	if !ok {
		probe := b.cfg.Probe
		if probe == nil {
			probe = b.probeBoot
		}
		pctx, cancel := context.WithTimeout(ctx, b.cfg.ProbeTimeout)
		start := time.Now()
		res = probe(pctx, spec)
		cancel()
		b.log.Info("kvm probe boot", "ok", res.OK, "why", res.Why, "took", time.Since(start).Round(time.Millisecond))
		if ctx.Err() == nil { // a cancelled caller says nothing about KVM
			if err := saveProbe(b.cfg.CacheDir, key, res, time.Now()); err != nil {
				b.log.Warn("kvm probe verdict not cached", "err", err)
			}
		}
	}
	facts.Probe = &res
	return ChooseAccel(b.cfg.Accel, facts)
}

// notice says msg once per Backend.
func (b *Backend) notice(msg string) {
	b.mu.Lock()
	seen := b.noticed[msg]
	b.noticed[msg] = true
	b.mu.Unlock()
	if seen {
		return
	}
	if b.cfg.Notice != nil {
		b.cfg.Notice(msg)
		return
	}
	b.log.Warn(msg)
}

// host gathers what Args needs for spec.
func (b *Backend) host(ctx context.Context, prog string, spec vm.Spec) (Host, Choice) {
	c := b.accel(ctx, prog, spec)
	// Shared RAM lets Save write it to a file that restores map on demand.
	h := Host{Accel: c.Accel, Arch: hostArch(), OS: runtime.GOOS, Vsock: hostVsock(b.root), Memory: Memory{Shared: sharedRAM}}
	if spec.Arch == vm.AMD64 {
		if p := filepath.Join(b.cfg.FirmwareDir, "qboot.rom"); regular(p) {
			h.QBoot = p
		}
	}
	if h.Vsock {
		// CIDs are host-wide; a random one from 2^31 rarely collides, and
		// a collision fails the start loudly (vhost-vsock: EADDRINUSE).
		h.CID = 3 + rand.Uint32N(1<<31-3)
	}
	return h, c
}

func regular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// Start validates spec, chooses the accelerator and boots the machine. It
// returns once QEMU answers on its QMP socket; the machine is killed when
// ctx ends.
func (b *Backend) Start(ctx context.Context, spec vm.Spec) (vm.Machine, error) {
	raw := spec
	spec = spec.WithDefaults(hostArch())
	if err := b.validate(spec, raw); err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	prog, err := b.program(spec.Arch)
	if err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	host, c := b.host(ctx, prog, spec)
	if host.Accel == TCG && b.cfg.Accel != TCG {
		b.notice(TCGNotice(c))
	}
	b.log.Info("starting qemu", "machine", spec.Name, "accel", host.Accel, "why", c.Why)
	m, err := b.start(ctx, prog, spec, host, false, b.confinement(prog, spec, host, ""))
	if err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	return m, nil
}

// probeBoot is the default ProbeFunc: it boots spec's kernel and initrd
// under KVM with ProbeCmdline, without disks or network, and looks for
// ProbeMarker on the console once the guest powers off or ctx ends.
func (b *Backend) probeBoot(ctx context.Context, spec vm.Spec) ProbeResult {
	prog, err := b.program(spec.Arch)
	if err != nil {
		return ProbeResult{Why: err.Error()}
	}
	dir, err := os.MkdirTemp("", "airlock-probe-")
	if err != nil {
		return ProbeResult{Why: err.Error()}
	}
	defer os.RemoveAll(dir)
	p := vm.Spec{
		Name: spec.Name + "-kvm-probe", Arch: spec.Arch, Kernel: spec.Kernel, Initrd: spec.Initrd,
		Cmdline: strings.TrimSpace(spec.Cmdline + " " + ProbeCmdline), CPUs: spec.CPUs, MemoryMiB: spec.MemoryMiB,
		Link: vm.Link{Kind: vm.LinkSerial}, Network: vm.NetworkNone, StateDir: dir,
	}
	host := Host{Accel: b.probeAccel, Arch: hostArch(), OS: runtime.GOOS}
	m, err := b.start(ctx, prog, p, host, false, nil)
	if err != nil {
		return ProbeResult{Why: lastLine(err.Error())}
	}
	werr := m.Wait()
	if consoleHas(m.ConsoleLog(), ProbeMarker) {
		return ProbeResult{OK: true}
	}
	why := "the guest did not report " + ProbeMarker
	if ctx.Err() != nil {
		why = "no answer from the guest in time"
	}
	if lines := vm.TailConsole(m.ConsoleLog(), 1); len(lines) > 0 {
		why += "; console ended with: " + lines[0]
	} else if werr != nil {
		why += "; " + lastLine(werr.Error())
	}
	return ProbeResult{Why: why}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s[i+1:]), "|"))
	}
	return s
}

// consoleHas says whether a line of the console log at path contains s.
func consoleHas(path, s string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return true
		}
	}
	return false
}

// Describe says how machines of arch run on this host. It never runs a
// probe boot: when one is needed and no verdict is cached for this QEMU
// and host kernel, it says so.
func (b *Backend) Describe(ctx context.Context, arch vm.Arch) (vm.HostReport, error) {
	if arch == "" {
		arch = hostArch()
	}
	r := vm.HostReport{Backend: b.Name(), Link: vm.LinkSerial}
	if hostVsock(b.root) {
		r.Link = vm.LinkVsock
	}
	prog, err := b.program(arch)
	if err != nil {
		return r, fmt.Errorf("describe qemu: %w", err)
	}
	v, err := b.version(ctx, prog)
	if err != nil {
		return r, fmt.Errorf("describe qemu: %w", err)
	}
	r.Hypervisor = fmt.Sprintf("%s (%s)", v, prog)
	facts := hostKVMFacts(b.root, arch, hostArch())
	c := ChooseAccel(b.cfg.Accel, facts)
	if c.NeedProbe {
		if res, ok := latestProbe(b.cfg.CacheDir, programIdentity(prog), kernelRelease(), arch); ok {
			facts.Probe = &res
			c = ChooseAccel(b.cfg.Accel, facts)
			r.Notes = append(r.Notes, "accelerator from a cached probe boot of the guest kernel")
		} else {
			c.Why += "; a probe boot of the guest kernel under KVM decides at the first start, TCG until it passes"
		}
	}
	r.Accelerator, r.Why = string(c.Accel), c.Why
	if arch == vm.AMD64 {
		if p := filepath.Join(b.cfg.FirmwareDir, "qboot.rom"); regular(p) {
			r.Notes = append(r.Notes, "firmware: "+p)
		} else {
			r.Notes = append(r.Notes, "firmware: SeaBIOS (qboot.rom not found; boots are ~0.5 s slower)")
		}
	}
	if r.Link == vm.LinkSerial {
		r.Notes = append(r.Notes, "no usable /dev/vhost-vsock: the guest link is a virtio-serial port, its connections multiplexed over one stream")
	}
	return r, nil
}

// latestProbe is the newest cached verdict for this QEMU, host kernel and
// arch, whatever the guest kernel.
func latestProbe(dir, qemu, hostKernel string, arch vm.Arch) (ProbeResult, bool) {
	if dir == "" {
		return ProbeResult{}, false
	}
	files, _ := filepath.Glob(filepath.Join(dir, "kvm-probe-*.json"))
	var best probeRecord
	found := false
	for _, f := range files {
		rec, ok := readProbeRecord(f)
		if !ok || rec.Key.QEMU != qemu || rec.Key.HostKernel != hostKernel || rec.Key.Arch != arch {
			continue
		}
		if !found || rec.When.After(best.When) {
			best, found = rec, true
		}
	}
	return best.Result, found
}
