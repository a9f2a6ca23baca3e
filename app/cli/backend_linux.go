package cli

import (
	"fmt"
	"path/filepath"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/qemu"
)

// newBackend is the hypervisor backend of this OS: QEMU on Linux.
func newBackend(e *env, h string) (vm.Backend, error) {
	return qemu.New(qemu.Config{
		CacheDir: filepath.Join(home.Layout{Root: h}.Cache(), "qemu"),
		Notice: func(s string) {
			if !e.quiet && !e.json {
				fmt.Fprintf(e.stderr, "airlock: %s\n", s)
			}
		},
	}), nil
}
