//go:build unix

package manifest

import "syscall"

// openFlags keeps opening a fifo from blocking; regular files ignore it.
const openFlags = syscall.O_NONBLOCK
