//go:build darwin && cgo

// Package vz is the Virtualization.framework backend of package vm, for
// macOS. It builds the vz configuration that vm/vz/vzconfig computes from a
// vm.Spec (an uncompressed Linux kernel on a generic platform with a
// persisted machine identifier, raw virtio-blk disks, virtio-fs shares, a
// virtio console to the log file, entropy, one vsock device carrying the
// guest link, NAT networking only on request), validates it, and runs the
// VM in-process. Machines can pause, and on Apple silicon with macOS 14 or
// later save their state.
//
// Only this package imports github.com/Code-Hex/vz, and every file is
// darwin-only: vz is cgo and Objective-C and builds only on a Mac (with cgo
// on; a darwin build without cgo has no VM backend). On other hosts its
// code is type-checked by internal/darwincheck. It must not import the
// guest packages, app, sync, review or fyne: the guest link's port comes
// from vm.Spec.Link.
package vz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/Code-Hex/vz/v3"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

// Config configures a Backend. The zero value is ready to use.
type Config struct {
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Notice receives one line for each adjustment made to fit the host
	// (CPUs or memory clamped); nil means Logger at warning level.
	Notice func(string)
}

// Backend runs machines under Virtualization.framework. Create it with New.
type Backend struct {
	cfg Config
	log *slog.Logger

	osOnce sync.Once
	osVer  vzconfig.OSVersion
	osErr  error
}

var (
	_ vm.Backend   = (*Backend)(nil)
	_ vm.Describer = (*Backend)(nil)
	_ vm.Restorer  = (*Backend)(nil) // restore_arm64.go; an error on Intel Macs
)

// New returns a Backend. It starts nothing.
func New(cfg Config) *Backend {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Backend{cfg: cfg, log: log}
}

// Name is "vz".
func (b *Backend) Name() string { return "vz" }

// osVersion is the running macOS version, read once.
func (b *Backend) osVersion() (vzconfig.OSVersion, error) {
	b.osOnce.Do(func() {
		s, err := syscall.Sysctl("kern.osproductversion")
		if err != nil {
			b.osErr = fmt.Errorf("read the macOS version (sysctl kern.osproductversion): %w", err)
			return
		}
		b.osVer, b.osErr = vzconfig.ParseOSVersion(s)
	})
	return b.osVer, b.osErr
}

// checkOS says why this Mac cannot run machines, if it cannot.
func (b *Backend) checkOS() error {
	v, err := b.osVersion()
	if err != nil {
		return err
	}
	if !v.AtLeast(vzconfig.MinMacOS) {
		return fmt.Errorf("vz: this Mac runs macOS %s: %w: Airlock needs macOS %s or later (update macOS)", v, vm.ErrNotSupported, vzconfig.MinMacOS)
	}
	return nil
}

// host is this Mac as the translation sees it.
func host() vzconfig.Host {
	return vzconfig.Host{
		Arch: vm.Arch(runtime.GOARCH),
		Limits: vzconfig.Limits{
			MinCPUs:   vz.VirtualMachineConfigurationMinimumAllowedCPUCount(),
			MaxCPUs:   vz.VirtualMachineConfigurationMaximumAllowedCPUCount(),
			MinMemory: vz.VirtualMachineConfigurationMinimumAllowedMemorySize(),
			MaxMemory: vz.VirtualMachineConfigurationMaximumAllowedMemorySize(),
		},
	}
}

// Validate checks spec against vz and this Mac without starting anything,
// reporting every problem at once.
func (b *Backend) Validate(ctx context.Context, spec vm.Spec) error {
	_, err := b.translate(spec)
	return err
}

// translate validates spec and maps it to the vz configuration.
func (b *Backend) translate(spec vm.Spec) (vzconfig.Config, error) {
	h := host()
	c, err := vzconfig.Translate(spec, h)
	errs := []error{b.checkOS(), err}
	if spec.Kernel != "" {
		arch := spec.Arch
		if arch == "" {
			arch = h.Arch
		}
		errs = append(errs, vzconfig.CheckKernel(spec.Kernel, arch))
	}
	for i, d := range spec.Disks {
		if _, err := os.Stat(d.Path); err != nil && d.Path != "" {
			errs = append(errs, fmt.Errorf("vz: disk %d: %w", i, err))
		}
	}
	for i, sh := range spec.Shares {
		if fi, err := os.Stat(sh.HostPath); err != nil {
			errs = append(errs, fmt.Errorf("vz: share %d (%s): %w", i, sh.Tag, err))
		} else if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("vz: share %d (%s): %s is not a directory", i, sh.Tag, sh.HostPath))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return vzconfig.Config{}, err
	}
	return c, nil
}

// Describe says how machines run on this Mac, for `airlock doctor`.
func (b *Backend) Describe(ctx context.Context, arch vm.Arch) (vm.HostReport, error) {
	r := vm.HostReport{
		Backend:     "vz",
		Hypervisor:  "Virtualization.framework",
		Accelerator: "Hypervisor.framework",
		Why:         "macOS runs every VM on Apple's hypervisor: there is nothing to choose",
		Link:        vm.LinkVsock,
	}
	v, err := b.osVersion()
	if err != nil {
		return r, err
	}
	r.Hypervisor += " (macOS " + v.String() + ")"
	if arch == "" {
		arch = vm.Arch(runtime.GOARCH)
	}
	if string(arch) != runtime.GOARCH {
		r.Notes = append(r.Notes, fmt.Sprintf("%s guests cannot run on this %s Mac: vz runs guests of the host's architecture only", arch, runtime.GOARCH))
	}
	if !v.AtLeast(vzconfig.MinMacOS) {
		r.Notes = append(r.Notes, fmt.Sprintf("macOS %s is too old: Airlock needs macOS %s or later", v, vzconfig.MinMacOS))
	}
	r.Notes = append(r.Notes, saveNote(v))
	h := host()
	r.Notes = append(r.Notes, fmt.Sprintf("a machine can have %d to %d CPUs and %d to %d MiB of memory",
		h.Limits.MinCPUs, h.Limits.MaxCPUs, h.Limits.MinMemory/vzconfig.MiB, h.Limits.MaxMemory/vzconfig.MiB))
	return r, nil
}

// Start boots a machine and returns once vz reports it running. The
// machine is force-stopped when ctx ends.
func (b *Backend) Start(ctx context.Context, spec vm.Spec) (vm.Machine, error) {
	m, err := b.create(spec)
	if err != nil {
		return nil, err
	}
	if err := m.start(ctx, "start", func() error { return m.vm.Start() }); err != nil {
		return nil, err
	}
	return m, nil
}

// create translates, builds and validates spec's configuration and creates
// the (stopped) virtual machine. It starts nothing.
func (b *Backend) create(spec vm.Spec) (*machine, error) {
	c, err := b.translate(spec)
	if err != nil {
		return nil, err
	}
	for _, n := range c.Notes {
		if b.cfg.Notice != nil {
			b.cfg.Notice(n)
		} else {
			b.log.Warn(n, "machine", spec.Name)
		}
	}
	built, err := build(c)
	if err != nil {
		return nil, fmt.Errorf("vz %s: %w", spec.Name, err)
	}
	// An invalid configuration given to NewVirtualMachine raises an
	// Objective-C exception that ends the process: validate first.
	if ok, err := built.cfg.Validate(); !ok || err != nil {
		if err == nil {
			err = errors.New("Virtualization.framework rejected the configuration")
		}
		return nil, fmt.Errorf("vz %s: validate the configuration: %w%s", spec.Name, err, entitlementHint(err))
	}
	v, err := vz.NewVirtualMachine(built.cfg)
	if err != nil {
		return nil, fmt.Errorf("vz %s: create the virtual machine: %w", spec.Name, err)
	}
	return newMachine(spec.Name, c, built, v, b.log.With("machine", spec.Name), b), nil
}

// entitlementHint explains the usual cause of a configuration rejected on
// a Mac where everything else looks right.
func entitlementHint(err error) string {
	if strings.Contains(err.Error(), "com.apple.security.virtualization") {
		return " (the binary must be signed with the com.apple.security.virtualization entitlement: " +
			"codesign --entitlements packaging/airlock.entitlements -s - <binary>)"
	}
	return ""
}
