package cli

import (
	"fmt"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/qemu"
)

// newBackend is the hypervisor backend of this OS: QEMU on Linux.
func newBackend(e *env, h string) (vm.Backend, error) {
	return qemu.New(qemu.Config{
		CacheDir: home.Layout{Root: h}.QEMUCache(),
		Notice: func(s string) {
			if !e.quiet && !e.json {
				fmt.Fprintf(e.stderr, "airlock: %s\n", s)
			}
		},
	}), nil
}
