//go:build unix

package review

import (
	"errors"
	"syscall"
)

const noFollow = syscall.O_NOFOLLOW

// errSyncUnsupported is what fsync of a directory returns where it is not
// supported; it is ignored.
var errSyncUnsupported = errors.ErrUnsupported
