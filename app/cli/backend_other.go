//go:build !linux

package cli

import (
	"fmt"
	"runtime"

	"github.com/airlock-dev/airlock/vm"
)

// newBackend is the hypervisor backend of this OS. The macOS backend
// (Virtualization.framework) comes with its own package; until then only
// Linux runs VMs.
func newBackend(e *env, h string) (vm.Backend, error) {
	return nil, fmt.Errorf("running VMs on %s: %w (Airlock runs VMs on Linux with QEMU today)", runtime.GOOS, vm.ErrNotSupported)
}
