package pipeline

import "golang.org/x/sys/unix"

// Open flags for reading a file the guest could have replaced.
const (
	noFollow = unix.O_NOFOLLOW
	nonBlock = unix.O_NONBLOCK
)
