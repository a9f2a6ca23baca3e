//go:build !linux

package qemu

import (
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/vm"
)

// sharedRAM is false: memfds are Linux's. Fresh RAM is anonymous here, and
// Save streams it.
const sharedRAM = false

func newRAM(int64) (*os.File, error) {
	return nil, fmt.Errorf("shared guest RAM: %w on this host (no memfd)", vm.ErrNotSupported)
}

func copyRAM(string, *os.File) error {
	return fmt.Errorf("copy the guest RAM: %w on this host (no memfd)", vm.ErrNotSupported)
}
