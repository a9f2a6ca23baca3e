//go:build !linux

package pipeline

import "syscall"

// Open flags for reading a file the guest could have replaced.
const (
	noFollow = syscall.O_NOFOLLOW
	nonBlock = syscall.O_NONBLOCK
)
