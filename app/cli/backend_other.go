//go:build !linux && !(darwin && cgo)

package cli

import (
	"fmt"
	"runtime"

	"github.com/airlock-dev/airlock/vm"
)

// newBackend is the hypervisor backend of this OS: none. Linux runs VMs
// with QEMU, macOS with Virtualization.framework, which needs a build with
// cgo (vm/vz is Objective-C underneath).
func newBackend(e *env, h string) (vm.Backend, error) {
	if runtime.GOOS == "darwin" {
		return nil, fmt.Errorf("running VMs: %w: this airlock was built without cgo, and the macOS backend (Virtualization.framework) needs it; build with CGO_ENABLED=1 on a Mac", vm.ErrNotSupported)
	}
	return nil, fmt.Errorf("running VMs on %s: %w (Airlock runs VMs on Linux with QEMU and on macOS with Virtualization.framework)", runtime.GOOS, vm.ErrNotSupported)
}

// newSupervisorBackend is newBackend for a VM's supervisor: Landlock, which
// confines Linux's, is Linux's only.
func newSupervisorBackend(e *env, h string) (vm.Backend, error) { return newBackend(e, h) }
