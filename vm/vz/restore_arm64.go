//go:build darwin && cgo && arm64

package vz

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

// Restore starts a machine from the state Save wrote to path, on this Mac
// (the file is encrypted with a key bound to it). spec must describe the
// saved machine; its StateDir may be another one: the identifier and MAC
// saved with the state are installed there (vzconfig.RestoreIdentity). The machine comes back running; guest-link
// connections of the saved machine are gone.
func (b *Backend) Restore(ctx context.Context, spec vm.Spec, path string) (vm.Machine, error) {
	// Below macOS 14 the framework's save/restore check raises an
	// Objective-C exception that ends the process: our own check first.
	v, err := b.osVersion()
	if err != nil {
		return nil, fmt.Errorf("restore vz %s: %w", spec.Name, err)
	}
	if err := vzconfig.CheckSaveRestore(v, vm.Arch(runtime.GOARCH), len(spec.Shares)); err != nil {
		return nil, fmt.Errorf("restore vz %s: %w", spec.Name, err)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("restore vz %s: saved state: %w", spec.Name, err)
	}
	// The saved machine's identifier (and MAC), kept next to the state,
	// go into this state directory: the framework restores only into the
	// machine that was saved.
	if err := vzconfig.RestoreIdentity(spec, path); err != nil {
		return nil, fmt.Errorf("restore vz %s: %w", spec.Name, err)
	}
	m, err := b.create(spec)
	if err != nil {
		return nil, err
	}
	if ok, err := m.built.cfg.ValidateSaveRestoreSupport(); !ok || err != nil {
		if err == nil {
			err = errors.New("a device of this machine cannot be restored")
		}
		return nil, fmt.Errorf("restore vz %s: %w: %w", spec.Name, vm.ErrNotSupported, err)
	}
	// A restore lands in Paused (vz wants a machine that never started);
	// Resume runs it.
	err = m.start(ctx, "restore", func() error {
		if err := m.vm.RestoreMachineStateFromURL(path); err != nil {
			return err
		}
		return m.vm.Resume()
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
