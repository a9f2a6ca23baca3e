package sandbox

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Open flags for reading a file the guest could have replaced.
const (
	noFollow = unix.O_NOFOLLOW
	nonBlock = unix.O_NONBLOCK
)

// reflink makes dst share src's blocks copy-on-write (FICLONE: btrfs, XFS,
// bcachefs); errNoReflink where the file system cannot.
func reflink(dst, src *os.File) error {
	err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EXDEV),
		errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		return errNoReflink
	}
	return err
}
