//go:build !linux

package sandbox

import (
	"os"
	"syscall"
)

// Open flags for reading a file the guest could have replaced.
const (
	noFollow = syscall.O_NOFOLLOW
	nonBlock = syscall.O_NONBLOCK
)

// reflink is not wired up here yet (macOS: clonefile(2) works on paths,
// in the vz issue): files are copied.
func reflink(dst, src *os.File) error { return errNoReflink }
