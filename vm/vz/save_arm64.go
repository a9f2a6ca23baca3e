//go:build darwin && cgo && arm64

package vz

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/Code-Hex/vz/v3"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

var _ vm.Snapshotter = (*machine)(nil)

// saveNote says whether machines on a Mac running v can be saved.
func saveNote(v vzconfig.OSVersion) string {
	if !v.AtLeast(vzconfig.SaveMacOS) {
		return fmt.Sprintf("saving machine state needs macOS %s or later; this Mac runs %s", vzconfig.SaveMacOS, v)
	}
	return "machines without virtio-fs shares can save their state"
}

// Save writes the machine's state to path, which must not exist. A running
// machine is paused for the save and resumed after it. The file is
// encrypted with a key bound to this Mac, and open guest-link connections
// do not survive a restore of it. The machine identifier and MAC are kept
// next to it (vzconfig.SaveIdentity).
func (m *machine) Save(ctx context.Context, path string) error {
	// Below macOS 14, ValidateSaveRestoreSupport raises an Objective-C
	// exception that ends the process: our own check comes first.
	v, err := m.backend.osVersion()
	if err != nil {
		return fmt.Errorf("save vz %s: %w", m.name, err)
	}
	if err := vzconfig.CheckSaveRestore(v, vm.ARM64, len(m.spec.Shares)); err != nil {
		return fmt.Errorf("save vz %s: %w", m.name, err)
	}
	if ok, err := m.built.cfg.ValidateSaveRestoreSupport(); !ok || err != nil {
		if err == nil {
			err = errors.New("a device of this machine cannot be saved")
		}
		return fmt.Errorf("save vz %s: %w: %w", m.name, vm.ErrNotSupported, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("save vz %s: %w", m.name, err)
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("save vz %s: %s already exists", m.name, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("save vz %s: %w", m.name, err)
	}

	wasRunning := false
	switch s := m.vm.State(); s {
	case vz.VirtualMachineStateRunning:
		if err := m.vm.Pause(); err != nil {
			return fmt.Errorf("save vz %s: pause: %w", m.name, err)
		}
		wasRunning = true
	case vz.VirtualMachineStatePaused:
	default:
		return fmt.Errorf("save vz %s: not possible while %s: %w", m.name, s, vm.ErrNotRunning)
	}
	// vz writes only to a path that does not exist: save next to path and
	// rename, so a failed save leaves nothing at path.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".saving")
	os.Remove(tmp)
	err = m.vm.SaveMachineStateToPath(tmp)
	if wasRunning {
		if rerr := m.vm.Resume(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("resume after saving: %w", rerr))
		}
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save vz %s: %w", m.name, err)
	}
	// The identity the restore needs goes with the state, so that it can
	// be restored into another state directory (a warm snapshot).
	if err := vzconfig.SaveIdentity(m.spec, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save vz %s: %w", m.name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save vz %s: %w", m.name, err)
	}
	return nil
}
