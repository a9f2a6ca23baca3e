package disk

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// fileClone is Linux's reflink: FICLONE shares src's extents with a new
// file (btrfs, xfs with reflink, bcachefs; ext4 refuses it).
func fileClone() (Method, func(src, dst string) error) {
	return MethodReflink, reflinkPath
}

func reflinkPath(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	err = unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("FICLONE: %w", err)
	}
	return nil
}

// reflink makes dst share src's blocks copy-on-write (FICLONE: btrfs, XFS,
// bcachefs); errNoReflink where the file system cannot.
func reflink(src, dst *os.File) error {
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
