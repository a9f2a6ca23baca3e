//go:build darwin && cgo && !arm64

package vz

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/vz/vzconfig"
)

// saveNote says whether machines on a Mac running v can be saved: never
// on an Intel Mac.
func saveNote(vzconfig.OSVersion) string {
	return "saving machine state needs a Mac with Apple silicon"
}

// Save is not possible on an Intel Mac: Virtualization.framework saves
// machine state on Apple silicon only (vz's save API exists in arm64 builds
// only), so Save always returns an error wrapping vm.ErrNotSupported.
func (m *machine) Save(ctx context.Context, path string) error {
	return fmt.Errorf("save vz %s: %w: saving machine state needs a Mac with Apple silicon", m.name, vm.ErrNotSupported)
}
