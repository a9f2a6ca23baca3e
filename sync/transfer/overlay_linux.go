package transfer

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// nonBlock keeps an open of a fifo from blocking.
const nonBlock = syscall.O_NONBLOCK

// isWhiteout reports whether info is an overlay whiteout: a character
// device numbered 0:0.
func isWhiteout(info fs.FileInfo) bool {
	if info.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// canReadTrusted fails unless this process can read trusted.* extended
// attributes: only with CAP_SYS_ADMIN (root, in the guest) does the
// kernel show them; others read none, and every opaque directory would
// look like one that merges.
func canReadTrusted() error {
	if os.Geteuid() != 0 {
		return errors.New("reading an overlay's upper layer needs root: only root sees the attributes that mark its opaque directories")
	}
	return nil
}

// isOpaque reports whether the directory f of an overlay's upper layer
// hides the lower layers' directory. Any value of trusted.overlay.opaque
// counts: "y" is an opaque directory, and "x" (a directory that may hold
// whiteouts made as extended attributes) is taken as one too, so that
// its whole subtree is compared.
func isOpaque(f *os.File) (bool, error) {
	var buf [8]byte
	_, err := unix.Fgetxattr(int(f.Fd()), "trusted.overlay.opaque", buf[:])
	switch {
	case err == nil, errors.Is(err, unix.ERANGE):
		return true, nil
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP):
		return false, nil
	}
	return false, err
}
