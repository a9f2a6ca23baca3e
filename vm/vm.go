// Package vm owns the hypervisor-neutral description of an Airlock virtual
// machine: the Spec (plain data that builds on every OS), the Backend and
// Machine interfaces that hypervisor packages (vm/qemu, vm/vz) implement, the
// machine State, and the sentinel errors callers branch on.
//
// It must not import any hypervisor binding, the guest packages, sync, review
// or the GUI: everything above it talks to a Machine, never to QEMU or vz.
package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
)

// Arch is a guest CPU architecture, spelled as GOARCH spells it.
type Arch string

// Guest architectures Airlock boots.
const (
	AMD64 Arch = "amd64"
	ARM64 Arch = "arm64"
)

// NetworkMode says whether the guest gets a network device.
type NetworkMode string

const (
	// NetworkNone gives the guest no network device at all. It is the
	// default: the guest reaches the outside only through the guest link.
	NetworkNone NetworkMode = "none"
	// NetworkNAT gives the guest one NAT'd network device (vz NAT, QEMU user
	// networking). It is unprotected and only used when a user asks for it.
	NetworkNAT NetworkMode = "nat"
)

// LinkKind is the transport of the guest link, the one byte stream that
// carries SSH between host and guest agent.
type LinkKind string

const (
	// LinkAuto lets the backend pick: vsock where the host has it, else a
	// virtio-serial port.
	LinkAuto LinkKind = ""
	// LinkVsock is an AF_VSOCK connection to Link.Port in the guest. Each
	// DialLink opens a new connection.
	LinkVsock LinkKind = "vsock"
	// LinkSerial is a virtio-serial port named guest.SerialPortName, bound
	// on the host to a unix socket. It is a single stream: one DialLink at a
	// time; a second one gets ErrLinkBusy until the first is closed. The
	// guest client multiplexes connections over it (guest/client.Mux).
	LinkSerial LinkKind = "serial"
)

// Link describes the guest link.
type Link struct {
	// Kind selects the transport; LinkAuto lets the backend choose.
	Kind LinkKind `json:"kind,omitempty" toml:"kind"`
	// Port is the vsock port the guest agent listens on (vsock only).
	Port uint32 `json:"port,omitempty" toml:"port"`
	// SocketPath is the unix socket the host side of a serial link is bound
	// to. Empty means a path inside Spec.StateDir.
	SocketPath string `json:"socket_path,omitempty" toml:"socket_path"`
}

// Disk is a raw or qcow2 block device attached as virtio-blk.
type Disk struct {
	Path     string `json:"path" toml:"path"`
	ReadOnly bool   `json:"read_only,omitempty" toml:"read_only"`
	// Format is "raw" (the default) or "qcow2" (QEMU only).
	Format string `json:"format,omitempty" toml:"format"`
}

// Share is a host directory shared into the guest over virtio-fs (QEMU: a
// virtiofsd per share and a vhost-user-fs device; vz: a virtio-fs device).
// The guest mounts it by Tag (mount -t virtiofs TAG DIR); where it is
// mounted is the guest's business, not the backend's.
//
// A machine with a share cannot be snapshotted: Virtualization.framework
// refuses to save state with a virtio-fs device attached, and QEMU cannot
// migrate vhost-user-fs. Snapshot capabilities (vm.Snapshotter) of such a
// machine return an error wrapping ErrNotSupported.
//
// The guest can write everything under HostPath (unless ReadOnly): share
// a staging copy made for the purpose, never a directory that matters.
type Share struct {
	// Tag names the share in the guest: 1 to MaxShareTag bytes, letters,
	// digits, '-', '_' and '.' only.
	Tag string `json:"tag" toml:"tag"`
	// HostPath is the absolute path of the shared directory on the host.
	HostPath string `json:"host_path" toml:"host_path"`
	// ReadOnly makes the share read-only for the guest.
	ReadOnly bool `json:"read_only,omitempty" toml:"read_only"`
}

// MaxShareTag is the longest share tag: virtio-fs carries it in a 36-byte
// field, and Linux wants it NUL-terminated there.
const MaxShareTag = 35

// validTag reports whether tag is a usable share tag.
func validTag(tag string) bool {
	if tag == "" || len(tag) > MaxShareTag {
		return false
	}
	for _, c := range tag {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// Spec is everything a backend needs to start one machine. It is plain data:
// it builds everywhere and round-trips through JSON and TOML.
type Spec struct {
	// Name identifies the machine in logs and process titles.
	Name string `json:"name" toml:"name"`
	// Arch is the guest architecture; empty means the host's.
	Arch Arch `json:"arch,omitempty" toml:"arch"`
	// Kernel is the kernel image: an uncompressed vmlinux (amd64, PVH boot)
	// or an uncompressed arm64 Image.
	Kernel string `json:"kernel" toml:"kernel"`
	// Initrd is the initramfs, optional.
	Initrd string `json:"initrd,omitempty" toml:"initrd"`
	// Cmdline is the kernel command line without the console= argument,
	// which the backend adds for its own console device.
	Cmdline string `json:"cmdline,omitempty" toml:"cmdline"`
	// CPUs is the number of virtual CPUs; zero means 1.
	CPUs int `json:"cpus,omitempty" toml:"cpus"`
	// MemoryMiB is the guest memory in MiB; zero means 512.
	MemoryMiB int `json:"memory_mib,omitempty" toml:"memory_mib"`
	// Disks are attached in order as virtio-blk devices (vda, vdb, …).
	Disks []Disk `json:"disks,omitempty" toml:"disks"`
	// Shares are host directories shared into the guest over virtio-fs. A
	// machine with shares cannot be snapshotted (see Share).
	Shares []Share `json:"shares,omitempty" toml:"shares"`
	// Link is the guest link.
	Link Link `json:"link" toml:"link"`
	// ConsoleLog receives everything the guest writes to its console.
	// Empty means a file console.log inside StateDir.
	ConsoleLog string `json:"console_log,omitempty" toml:"console_log"`
	// Network is NetworkNone (the zero value behaves as none) or NetworkNAT.
	Network NetworkMode `json:"network,omitempty" toml:"network"`
	// StateDir holds the backend's runtime files (sockets, logs). It must
	// exist. Unix socket paths are limited to 104 bytes on macOS and 108 on
	// Linux, so keep it short.
	StateDir string `json:"state_dir" toml:"state_dir"`
}

// Defaults used for zero fields of a Spec.
const (
	DefaultCPUs      = 1
	DefaultMemoryMiB = 512
)

// WithDefaults returns a copy of s with zero fields filled in; arch is the
// architecture to assume when s.Arch is empty (usually runtime.GOARCH).
func (s Spec) WithDefaults(arch Arch) Spec {
	if s.Arch == "" {
		s.Arch = arch
	}
	if s.CPUs == 0 {
		s.CPUs = DefaultCPUs
	}
	if s.MemoryMiB == 0 {
		s.MemoryMiB = DefaultMemoryMiB
	}
	if s.Network == "" {
		s.Network = NetworkNone
	}
	return s
}

// Validate reports every problem with s at once. It checks only what is
// true for every backend; a Backend's Validate adds its own rules.
func (s Spec) Validate() error {
	var errs []error
	if s.Kernel == "" {
		errs = append(errs, errors.New("spec: no kernel"))
	}
	switch s.Arch {
	case AMD64, ARM64, "":
	default:
		errs = append(errs, fmt.Errorf("spec: unknown arch %q (want amd64 or arm64)", s.Arch))
	}
	if s.CPUs < 0 {
		errs = append(errs, fmt.Errorf("spec: cpus %d is negative", s.CPUs))
	}
	if s.MemoryMiB < 0 || (s.MemoryMiB > 0 && s.MemoryMiB < 64) {
		errs = append(errs, fmt.Errorf("spec: memory %d MiB is below the 64 MiB minimum", s.MemoryMiB))
	}
	switch s.Network {
	case NetworkNone, NetworkNAT, "":
	default:
		errs = append(errs, fmt.Errorf("spec: unknown network mode %q (want none or nat)", s.Network))
	}
	switch s.Link.Kind {
	case LinkAuto, LinkSerial, LinkVsock:
	default:
		errs = append(errs, fmt.Errorf("spec: unknown link kind %q (want vsock or serial)", s.Link.Kind))
	}
	if s.StateDir == "" {
		errs = append(errs, errors.New("spec: no state dir"))
	}
	for i, d := range s.Disks {
		if d.Path == "" {
			errs = append(errs, fmt.Errorf("spec: disk %d has no path", i))
		}
		switch d.Format {
		case "", "raw", "qcow2":
		default:
			errs = append(errs, fmt.Errorf("spec: disk %d: unknown format %q", i, d.Format))
		}
	}
	tags := map[string]bool{}
	for i, sh := range s.Shares {
		if !validTag(sh.Tag) {
			errs = append(errs, fmt.Errorf("spec: share %d: tag %q: want 1 to %d letters, digits, '-', '_' or '.'", i, sh.Tag, MaxShareTag))
		} else if tags[sh.Tag] {
			errs = append(errs, fmt.Errorf("spec: share %d: tag %q is used twice", i, sh.Tag))
		}
		tags[sh.Tag] = true
		if !filepath.IsAbs(sh.HostPath) {
			errs = append(errs, fmt.Errorf("spec: share %d (%s): host path %q is not absolute", i, sh.Tag, sh.HostPath))
		}
	}
	return errors.Join(errs...)
}

// State is where a machine is in its life.
type State int

const (
	StateStarting State = iota // process or VM created, guest booting
	StateRunning               // the hypervisor reports the guest running
	StatePaused                // vCPUs stopped, memory kept
	StateStopping              // a stop was requested
	StateStopped               // the VM is gone; Wait has returned
)

func (s State) String() string {
	switch s {
	case StateStarting:
		return "starting"
	case StateRunning:
		return "running"
	case StatePaused:
		return "paused"
	case StateStopping:
		return "stopping"
	case StateStopped:
		return "stopped"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// MarshalText makes State read as a word in JSON and TOML.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads the word MarshalText writes.
func (s *State) UnmarshalText(b []byte) error {
	for st := StateStarting; st <= StateStopped; st++ {
		if st.String() == string(b) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("unknown machine state %q", b)
}

// Sentinel errors. Wrap them with %w; test with errors.Is.
var (
	// ErrNotSupported: the backend or this host cannot do what was asked
	// (an optional capability, an architecture, a link kind).
	ErrNotSupported = errors.New("not supported")
	// ErrNotRunning: the machine has stopped, or never started.
	ErrNotRunning = errors.New("machine is not running")
	// ErrLinkBusy: the single-stream serial link is already open.
	ErrLinkBusy = errors.New("guest link is already in use")
	// ErrHypervisorMissing: the hypervisor program or framework is absent.
	// The wrapping error says how to install it.
	ErrHypervisorMissing = errors.New("hypervisor not found")
)

// Backend starts machines on one hypervisor.
type Backend interface {
	// Name is a short lower-case name: "qemu", "vz".
	Name() string
	// Validate checks spec against this backend and host without starting
	// anything, reporting every problem at once.
	Validate(ctx context.Context, spec Spec) error
	// Start boots a machine. The machine is force-stopped when ctx ends, so
	// pass a context that lives as long as the machine should.
	Start(ctx context.Context, spec Spec) (Machine, error)
}

// Machine is one running virtual machine.
type Machine interface {
	// DialLink opens the byte stream to the guest agent (see LinkKind).
	DialLink(ctx context.Context) (net.Conn, error)
	// Stop asks the guest to power off and waits; when ctx ends first it
	// forces the machine off. It is idempotent and returns once the machine
	// is gone.
	Stop(ctx context.Context) error
	// Wait blocks until the machine is gone and returns why: nil after a
	// clean guest power-off, an error after a crash or a forced stop.
	Wait() error
	// State is the current state.
	State() State
	// Link reports the link kind actually in use.
	LinkKind() LinkKind
	// ConsoleLog is the path of the file receiving the guest console.
	ConsoleLog() string
}

// Describer is an optional Backend capability: a one-paragraph account of
// how machines will run on this host (hypervisor, accelerator and why, link
// kind), for `airlock doctor`.
type Describer interface {
	Describe(ctx context.Context, arch Arch) (HostReport, error)
}

// HostReport is what a Describer says about this host.
type HostReport struct {
	Backend     string   `json:"backend"`
	Hypervisor  string   `json:"hypervisor"` // program or framework, with version
	Accelerator string   `json:"accelerator"`
	Why         string   `json:"why"` // why this accelerator
	Link        LinkKind `json:"link"`
	Notes       []string `json:"notes,omitempty"`
}

// Snapshotter is an optional Machine capability: save the running machine's
// state to a file that a later Start can restore. A machine started with
// Spec.Shares cannot be saved: Save returns an error wrapping
// ErrNotSupported.
type Snapshotter interface {
	Save(ctx context.Context, path string) error
}

// Emulator is an optional Machine capability: whether the guest's CPU is
// emulated (QEMU's TCG), so that every byte the guest handles costs many
// host instructions.
type Emulator interface {
	Emulated() bool
}

// Pauser is an optional Machine capability: stop the vCPUs, keeping memory,
// and run them again.
type Pauser interface {
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
}
