//go:build cgo

package cli

import (
	"fmt"

	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/vz"
)

// newBackend is the hypervisor backend of this OS: Virtualization.framework
// on macOS.
func newBackend(e *env, h string) (vm.Backend, error) {
	return vz.New(vz.Config{
		Notice: func(s string) {
			if !e.quiet && !e.json {
				fmt.Fprintf(e.stderr, "airlock: %s\n", s)
			}
		},
	}), nil
}

// newSupervisorBackend is newBackend for a VM's supervisor: Landlock, which
// confines Linux's, is Linux's only.
func newSupervisorBackend(e *env, h string) (vm.Backend, error) { return newBackend(e, h) }
