//go:build darwin && cgo && !arm64

package vz

import (
	"context"
	"fmt"

	"github.com/airlock-dev/airlock/vm"
)

// Restore is not possible on an Intel Mac: Virtualization.framework saves
// and restores machine state on Apple silicon only (vz's API exists in
// arm64 builds only), so Restore always returns an error wrapping
// vm.ErrNotSupported.
func (b *Backend) Restore(ctx context.Context, spec vm.Spec, path string) (vm.Machine, error) {
	return nil, fmt.Errorf("restore vz %s: %w: restoring machine state needs a Mac with Apple silicon", spec.Name, vm.ErrNotSupported)
}
