package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limits are the resources and caps of one sandbox. A zero field is not
// set (the next layer, or the default, decides); Unlimited (-1, "none" in
// TOML and flags) means no limit where a field allows it.
type Limits struct {
	// CPUs is the number of virtual CPUs; it is clamped to the host's.
	CPUs int `toml:"cpus" json:"cpus,omitempty"`
	// Memory is the guest memory.
	Memory Size `toml:"memory" json:"memory,omitempty"`
	// Disk is the size of the sandbox's own disk, which holds /workspace:
	// a sparse image, so it costs only what the guest writes, and it is
	// the quota (a full disk is ENOSPC in the guest). "none" puts
	// /workspace in the guest's memory instead.
	Disk Size `toml:"disk" json:"disk,omitempty"`
	// Timeout is the wall-clock limit of the command; the host stops the
	// VM if the guest does not give up by itself.
	Timeout Duration `toml:"timeout" json:"timeout,omitempty"`
	// IdleTTL is how long a finished sandbox's VM may stay up unused.
	IdleTTL Duration `toml:"idle_ttl" json:"idle_ttl,omitempty"`
	// MaxPullBytes caps the bytes of the files collected from /workspace
	// (and so what is pulled back).
	MaxPullBytes Size `toml:"max_pull_bytes" json:"max_pull_bytes,omitempty"`
	// MaxFiles caps the entries of the collected tree (and so the files
	// pulled back).
	MaxFiles int `toml:"max_files" json:"max_files,omitempty"`
	// MaxFileSize caps one collected file.
	MaxFileSize Size `toml:"max_file_size" json:"max_file_size,omitempty"`
}

// DefaultLimits are Airlock's safe defaults. The caps equal
// manifest.Limits' defaults.
func DefaultLimits() Limits {
	return Limits{
		CPUs:         2,
		Memory:       2 * GiB,
		Disk:         8 * GiB,
		Timeout:      Duration(time.Hour),
		IdleTTL:      Duration(15 * time.Minute),
		MaxPullBytes: 4 * GiB,
		MaxFiles:     500_000,
		MaxFileSize:  1 * GiB,
	}
}

// Minimums of the sizes that cannot be "none".
const (
	minMemory = 64 * MiB
	minDisk   = 64 * MiB
)

// limitField is one field of Limits seen as an int64, for the rules that
// treat every field alike (layering, narrowing).
type limitField struct {
	key  string
	get  func(Limits) int64
	set  func(*Limits, int64)
	show func(int64) string
}

var limitFields = []limitField{
	{"cpus", func(l Limits) int64 { return int64(l.CPUs) }, func(l *Limits, v int64) { l.CPUs = int(v) }, showInt},
	{"memory", func(l Limits) int64 { return int64(l.Memory) }, func(l *Limits, v int64) { l.Memory = Size(v) }, showSize},
	{"disk", func(l Limits) int64 { return int64(l.Disk) }, func(l *Limits, v int64) { l.Disk = Size(v) }, showSize},
	{"timeout", func(l Limits) int64 { return int64(l.Timeout) }, func(l *Limits, v int64) { l.Timeout = Duration(v) }, showDuration},
	{"idle_ttl", func(l Limits) int64 { return int64(l.IdleTTL) }, func(l *Limits, v int64) { l.IdleTTL = Duration(v) }, showDuration},
	{"max_pull_bytes", func(l Limits) int64 { return int64(l.MaxPullBytes) }, func(l *Limits, v int64) { l.MaxPullBytes = Size(v) }, showSize},
	{"max_files", func(l Limits) int64 { return int64(l.MaxFiles) }, func(l *Limits, v int64) { l.MaxFiles = int(v) }, showInt},
	{"max_file_size", func(l Limits) int64 { return int64(l.MaxFileSize) }, func(l *Limits, v int64) { l.MaxFileSize = Size(v) }, showSize},
}

func showInt(v int64) string {
	if v < 0 {
		return "none"
	}
	return strconv.FormatInt(v, 10)
}
func showSize(v int64) string     { return Size(v).String() }
func showDuration(v int64) string { return Duration(v).String() }

// Over returns l with every field that o sets replaced by o's.
func (l Limits) Over(o Limits) Limits {
	for _, f := range limitFields {
		if v := f.get(o); v != 0 {
			f.set(&l, v)
		}
	}
	return l
}

// WithDefaults fills the fields l does not set from DefaultLimits.
func (l Limits) WithDefaults() Limits { return DefaultLimits().Over(l) }

// Validate reports every problem at once.
func (l Limits) Validate() error {
	var errs []error
	if l.CPUs < 0 {
		errs = append(errs, fmt.Errorf("limits: cpus %d: want 1 or more", l.CPUs))
	}
	if l.Memory < 0 || (l.Memory > 0 && l.Memory < minMemory) {
		errs = append(errs, fmt.Errorf("limits: memory %s: want at least %s", l.Memory, minMemory))
	}
	if l.Disk > 0 && l.Disk < minDisk {
		errs = append(errs, fmt.Errorf("limits: disk %s: want at least %s, or none", l.Disk, minDisk))
	}
	if l.MaxFiles < Unlimited {
		errs = append(errs, fmt.Errorf("limits: max_files %d: want a positive count or none", l.MaxFiles))
	}
	return errors.Join(errs...)
}

// String lists every field as key=value, in a fixed order.
func (l Limits) String() string {
	parts := make([]string, len(limitFields))
	for i, f := range limitFields {
		parts[i] = f.key + "=" + f.show(f.get(l))
	}
	return strings.Join(parts, " ")
}

// narrower reports whether v is tighter than or equal to allowed (both
// set; Unlimited is the widest).
func narrower(v, allowed int64) bool {
	switch {
	case allowed < 0:
		return true
	case v < 0:
		return false
	}
	return v <= allowed
}

func limitKeys() string {
	keys := make([]string, len(limitFields))
	for i, f := range limitFields {
		keys[i] = f.key
	}
	return strings.Join(keys, ", ")
}

// Sources are the layers Resolve merges, lowest first: Airlock's
// defaults, the user's file, the project's file (which may only narrow),
// and the command line (the user again, who may ask for anything).
type Sources struct {
	User    User
	Project Project
	// Flags are limits given on the command line; zero fields are not
	// given.
	Flags Limits
	// OpenNetworkFlag is --open-network.
	OpenNetworkFlag bool
	// HostCPUs is the host's CPU count; CPUs are clamped to it. Zero means
	// no clamp.
	HostCPUs int
	// HostMemory is the host's memory in bytes; a run asking for more is
	// refused (a VM's memory is only limited by the host's, so 8 GiB on
	// a host of 16 is fine). Zero means no check.
	HostMemory int64
	// ConfirmWiden is the hook through which a project file may widen a
	// setting past what the user allows (more CPUs, a longer timeout, open
	// network): it is asked with the setting's key, the project's value
	// and the allowed one, and the project's value is taken only when it
	// returns true. Nil refuses every widening: until the user can confirm
	// a project's request (remembered by the file's hash), a project file
	// only narrows.
	ConfirmWiden func(key, project, allowed string) bool
}

// Effective is the outcome of Resolve for one run.
type Effective struct {
	// Limits has every field set (Unlimited where there is no limit).
	Limits Limits
	// OpenNetwork gives the VM an unprotected NAT network device.
	OpenNetwork bool
	// Notes say, for people, what was ignored or adjusted and why.
	Notes []string
}

// Resolve merges the sources into the limits of one run. The project
// file's values are taken only where they narrow the user's (or where
// ConfirmWiden allows them); what it asks beyond is ignored with a note.
// Only the user (config or flag) turns open network on.
func Resolve(s Sources) (Effective, error) {
	if err := errors.Join(s.User.Limits.Validate(), s.Project.Limits.Validate(), s.Flags.Validate()); err != nil {
		return Effective{}, err
	}
	var e Effective
	allowed := s.User.Limits.WithDefaults()
	l := allowed
	for _, f := range limitFields {
		p, a := f.get(s.Project.Limits), f.get(allowed)
		switch {
		case p == 0:
		case narrower(p, a):
			f.set(&l, p)
		case s.ConfirmWiden != nil && s.ConfirmWiden(f.key, f.show(p), f.show(a)):
			f.set(&l, p)
		default:
			e.Notes = append(e.Notes, fmt.Sprintf("%s asks for %s = %s, more than the %s allowed: ignored (a project file can only narrow limits; set it in %s or on the command line)",
				FileName, f.key, f.show(p), f.show(a), UserFileName))
		}
	}
	l = l.Over(s.Flags)
	if s.HostCPUs > 0 && l.CPUs > s.HostCPUs {
		e.Notes = append(e.Notes, fmt.Sprintf("cpus: %d is more than this host's %d, using %d", l.CPUs, s.HostCPUs, s.HostCPUs))
		l.CPUs = s.HostCPUs
	}
	if s.HostMemory > 0 && int64(l.Memory) > s.HostMemory {
		return Effective{}, fmt.Errorf("limits: memory %s is more than this host has (%.1fG): ask for less (--memory, or [limits] memory in %s)",
			l.Memory, float64(s.HostMemory)/float64(GiB), UserFileName)
	}
	e.Limits = l
	e.OpenNetwork = s.OpenNetworkFlag || s.User.OpenNetwork
	if s.Project.OpenNetwork && !e.OpenNetwork {
		if s.ConfirmWiden != nil && s.ConfirmWiden("open_network", "true", "false") {
			e.OpenNetwork = true
		} else {
			e.Notes = append(e.Notes, fmt.Sprintf("%s asks for open_network = true: ignored (a project file cannot open the network; use --open-network or open_network = true in %s)", FileName, UserFileName))
		}
	}
	return e, nil
}
