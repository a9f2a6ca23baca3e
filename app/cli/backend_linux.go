package cli

import (
	"fmt"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/qemu"
)

// newBackend is the hypervisor backend of this OS: QEMU on Linux.
func newBackend(e *env, h string) (vm.Backend, error) { return qemuBackend(e, h, false), nil }

// newSupervisorBackend is newBackend for a VM's supervisor (`airlock
// vmhost`): it confines itself and its QEMU with Landlock to what the
// machine needs, just before QEMU starts (qemu.Config.ConfineProcess).
func newSupervisorBackend(e *env, h string) (vm.Backend, error) { return qemuBackend(e, h, true), nil }

func qemuBackend(e *env, h string, confine bool) vm.Backend {
	return qemu.New(qemu.Config{
		ConfineProcess: confine,
		CacheDir:       home.Layout{Root: h}.QEMUCache(),
		Notice: func(s string) {
			if !e.quiet && !e.json {
				fmt.Fprintf(e.stderr, "airlock: %s\n", s)
			}
		},
	})
}
