package vzconfig

import (
	"fmt"

	"github.com/airlock-dev/airlock/vm"
)

// More macOS versions that gate vz features.
var (
	// RosettaMacOS shares Rosetta into arm64 Linux guests, to run x86-64
	// Linux binaries there.
	RosettaMacOS = OSVersion{Major: 13}
	// NestedMacOS lets a guest run its own VMs (and only on an M3 or later).
	NestedMacOS = OSVersion{Major: 15}
)

// Feature is something Virtualization.framework does or does not allow on
// a Mac, as `airlock doctor` reports it.
type Feature struct {
	Name    string `json:"name"`
	Allowed bool   `json:"allowed"`
	// Needs says what the feature needs, when it is not allowed.
	Needs string `json:"needs,omitempty"`
}

// Features says which of the vz features Airlock uses a Mac running macOS
// v on arch allows. It is pure: the version gates of vz, in one place.
func Features(v OSVersion, arch vm.Arch) []Feature {
	gate := func(name string, min OSVersion, armOnly bool, extra string) Feature {
		f := Feature{Name: name, Allowed: v.AtLeast(min) && (!armOnly || arch == vm.ARM64)}
		if !f.Allowed {
			var needs []string
			if armOnly && arch != vm.ARM64 {
				needs = append(needs, "a Mac with Apple silicon")
			}
			if !v.AtLeast(min) {
				needs = append(needs, fmt.Sprintf("macOS %s or later (this Mac runs %s)", min, v))
			}
			f.Needs = joinAnd(needs)
		}
		if f.Allowed && extra != "" {
			f.Needs = extra
		}
		return f
	}
	return []Feature{
		gate("Linux VMs (vsock link, persisted machine identity)", MinMacOS, false, ""),
		gate("virtio-fs shares (--sync virtiofs)", MinMacOS, false, ""),
		gate("save and restore machine state (warm starts, checkpoints)", SaveMacOS, true, ""),
		gate("Rosetta for x86-64 binaries in arm64 guests", RosettaMacOS, true, ""),
		gate("nested virtualization in guests", NestedMacOS, true, "also needs an M3 or later"),
	}
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return s[0] + " and " + s[1]
}

// RosettaState is whether Rosetta for Linux can be used on this Mac
// (vz.LinuxRosettaDirectoryShareAvailability, in the same order).
type RosettaState int

const (
	RosettaNotSupported RosettaState = iota // an Intel Mac, or macOS older than 13
	RosettaNotInstalled                     // Apple silicon, Rosetta not installed yet
	RosettaInstalled
)

func (r RosettaState) String() string {
	switch r {
	case RosettaNotSupported:
		return "not supported on this Mac (needs Apple silicon and macOS 13)"
	case RosettaNotInstalled:
		return "not installed (install it with: softwareupdate --install-rosetta --agree-to-license)"
	case RosettaInstalled:
		return "installed"
	}
	return fmt.Sprintf("RosettaState(%d)", int(r))
}

// MarshalText makes a RosettaState read as its description in JSON.
func (r RosettaState) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// CheckSaveRestore says why machines with shares shares cannot be saved or
// restored on a Mac running macOS v on arch, or nil when they can. The
// errors wrap vm.ErrNotSupported. Check it before any save or restore call:
// below macOS 14, vz's save/restore support check raises an Objective-C
// exception that ends the process.
func CheckSaveRestore(v OSVersion, arch vm.Arch, shares int) error {
	switch {
	case arch != vm.ARM64:
		return fmt.Errorf("%w: saving and restoring machine state needs a Mac with Apple silicon", vm.ErrNotSupported)
	case !v.AtLeast(SaveMacOS):
		return fmt.Errorf("%w: saving and restoring machine state needs macOS %s or later, this Mac runs %s", vm.ErrNotSupported, SaveMacOS, v)
	case shares > 0:
		return fmt.Errorf("%w: the machine has a virtio-fs share, and Virtualization.framework cannot save or restore a machine with a virtio-fs device; "+
			"use a sync mode other than virtiofs to be able to snapshot it", vm.ErrNotSupported)
	}
	return nil
}
