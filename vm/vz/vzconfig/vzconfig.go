// Package vzconfig translates a vm.Spec into a plain description of the
// Virtualization.framework configuration that vm/vz builds from it: CPU
// count and memory clamped to what the Mac allows, the Linux boot loader
// (with the kernel format checked), disks, virtio-fs shares, the console,
// entropy, the one vsock device, networking and the files that must persist
// between runs (machine identifier, MAC address).
//
// It is plain Go so that the translation compiles and is tested on every
// OS; only the final vz calls live in vm/vz. It imports only vm,
// internal/atomicfile and the standard library. It must not import vz
// (only vm/vz may), the guest packages, sync, review or app.
package vzconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/vm"
)

// Limits are the CPU and memory bounds of the host's Virtualization.framework
// (VZVirtualMachineConfiguration's minimum and maximum allowed values).
type Limits struct {
	MinCPUs, MaxCPUs     uint
	MinMemory, MaxMemory uint64 // bytes
}

// Host is what the translation needs to know about the Mac.
type Host struct {
	// Arch is the host's CPU architecture: vz runs guests of that
	// architecture only.
	Arch vm.Arch
	// Limits bound CPU count and memory.
	Limits Limits
}

// Caching is a disk image caching mode.
type Caching string

// Sync is a disk image synchronization mode.
type Sync string

// The disk modes Airlock uses: host page cache on, guest flushes become
// fsync(2). The framework's defaults have caused disk corruption (vfkit and
// lima both moved to these).
const (
	CachingCached Caching = "cached"
	SyncFsync     Sync    = "fsync"
)

// Disk is one raw image attached as virtio-blk.
type Disk struct {
	Path     string
	ReadOnly bool
	Caching  Caching
	Sync     Sync
}

// Share is one virtio-fs device exposing a host directory under Tag.
type Share struct {
	Tag      string
	HostPath string
	ReadOnly bool
}

// Config is the vz configuration of one machine, as plain data.
type Config struct {
	// Kernel is an uncompressed arm64 Image (or an x86 bzImage on Intel).
	Kernel string
	// Initrd is the initramfs; empty means none (vz.WithInitrd must then
	// not be called: it fails on an empty path).
	Initrd string
	// Cmdline is the kernel command line, ending in console=hvc0.
	Cmdline string
	// CPUs is the vCPU count, within Limits.
	CPUs uint
	// Memory is the guest memory in bytes: within Limits and a multiple of
	// 1 MiB.
	Memory uint64
	// MachineIDPath holds the generic platform's machine identifier. It
	// persists across runs: restoring saved state needs the same one.
	MachineIDPath string
	// Disks are attached as virtio-blk in order.
	Disks []Disk
	// Shares are virtio-fs devices, one per share.
	Shares []Share
	// ConsoleLog receives the guest's hvc0 console (a virtio console
	// serial port attached to a file).
	ConsoleLog string
	// Entropy adds a virtio-rng device.
	Entropy bool
	// VsockPort is the guest agent's port on the machine's one virtio
	// socket device.
	VsockPort uint32
	// NAT adds one virtio-net device on vz's NAT with the MAC address
	// persisted in MACPath; false means no network device at all.
	NAT     bool
	MACPath string
	// Notes say what was adjusted to fit the host (clamped CPUs, memory).
	Notes []string
}

// MiB is the memory granularity vz requires.
const MiB = 1 << 20

// Names of the files a machine keeps in its state directory.
const (
	consoleName   = "console.log"
	machineIDName = "vz-machine-id"
	macName       = "vz-mac"
)

// ConsoleLog is the path of the file receiving the guest console.
func ConsoleLog(spec vm.Spec) string {
	if spec.ConsoleLog != "" {
		return spec.ConsoleLog
	}
	return filepath.Join(spec.StateDir, consoleName)
}

// MachineIDPath is where the machine identifier of spec's machine is kept.
func MachineIDPath(spec vm.Spec) string { return filepath.Join(spec.StateDir, machineIDName) }

// MACPath is where the NAT MAC address of spec's machine is kept.
func MACPath(spec vm.Spec) string { return filepath.Join(spec.StateDir, macName) }

// Translate maps spec to the vz configuration for host. It reads no files
// (CheckKernel does that) and reports every problem at once.
func Translate(spec vm.Spec, host Host) (Config, error) {
	errs := []error{spec.Validate()}
	s := spec.WithDefaults(host.Arch)
	if s.Arch != host.Arch {
		errs = append(errs, fmt.Errorf("vz: a %s guest on this %s Mac: %w: Virtualization.framework runs guests of the host's architecture only (use an %s image)",
			s.Arch, host.Arch, vm.ErrNotSupported, host.Arch))
	}
	switch s.Link.Kind {
	case vm.LinkAuto, vm.LinkVsock:
		if s.Link.Port == 0 {
			errs = append(errs, errors.New("vz: the vsock link needs a port (spec.Link.Port is 0)"))
		}
	case vm.LinkSerial:
		errs = append(errs, fmt.Errorf("vz: serial link: %w: vz always has vsock, use the vsock link", vm.ErrNotSupported))
	}
	c := Config{
		Kernel:        s.Kernel,
		Initrd:        s.Initrd,
		Cmdline:       strings.TrimSpace(s.Cmdline + " console=hvc0"),
		MachineIDPath: MachineIDPath(s),
		ConsoleLog:    ConsoleLog(s),
		Entropy:       true,
		VsockPort:     s.Link.Port,
		NAT:           s.Network == vm.NetworkNAT,
	}
	if c.NAT {
		c.MACPath = MACPath(s)
	}
	if s.CPUs > 0 {
		c.CPUs, c.Notes = clampCPUs(uint(s.CPUs), host.Limits, c.Notes)
	}
	if s.MemoryMiB > 0 {
		c.Memory, c.Notes = clampMemory(uint64(s.MemoryMiB)*MiB, host.Limits, c.Notes)
	}
	for i, d := range s.Disks {
		switch d.Format {
		case "", "raw":
		default:
			errs = append(errs, fmt.Errorf("vz: disk %d (%s): %w: format %q; Virtualization.framework attaches raw images only (convert with `qemu-img convert -O raw`)",
				i, d.Path, vm.ErrNotSupported, d.Format))
			continue
		}
		c.Disks = append(c.Disks, Disk{Path: d.Path, ReadOnly: d.ReadOnly, Caching: CachingCached, Sync: SyncFsync})
	}
	for i, sh := range s.Shares {
		// vm.Spec.Validate checks the tag's characters; vz's own rule is
		// non-empty and under 36 bytes.
		if sh.Tag == "" || len(sh.Tag) >= 36 {
			errs = append(errs, fmt.Errorf("vz: share %d: tag %q must be 1 to 35 bytes", i, sh.Tag))
			continue
		}
		c.Shares = append(c.Shares, Share{Tag: sh.Tag, HostPath: sh.HostPath, ReadOnly: sh.ReadOnly})
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// clampCPUs fits n into the limits; zero limits are no limit.
func clampCPUs(n uint, l Limits, notes []string) (uint, []string) {
	if l.MinCPUs > 0 && n < l.MinCPUs {
		notes = append(notes, fmt.Sprintf("cpus: %d is below this Mac's minimum, using %d", n, l.MinCPUs))
		n = l.MinCPUs
	}
	if l.MaxCPUs > 0 && n > l.MaxCPUs {
		notes = append(notes, fmt.Sprintf("cpus: %d is more than this Mac allows, using %d", n, l.MaxCPUs))
		n = l.MaxCPUs
	}
	return n, notes
}

// clampMemory fits b bytes into the limits, keeping it a multiple of 1 MiB:
// a minimum is rounded up to the next MiB, a maximum down.
func clampMemory(b uint64, l Limits, notes []string) (uint64, []string) {
	if l.MinMemory > 0 && b < l.MinMemory {
		up := (l.MinMemory + MiB - 1) / MiB * MiB
		notes = append(notes, fmt.Sprintf("memory: %d MiB is below this Mac's minimum, using %d MiB", b/MiB, up/MiB))
		b = up
	}
	if l.MaxMemory > 0 && b > l.MaxMemory {
		down := l.MaxMemory / MiB * MiB
		notes = append(notes, fmt.Sprintf("memory: %d MiB is more than this Mac allows, using %d MiB", b/MiB, down/MiB))
		b = down
	}
	return b / MiB * MiB, notes
}
