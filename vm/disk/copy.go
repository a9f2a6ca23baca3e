package disk

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync/atomic"
)

// errNoReflink: the file system (or OS) cannot clone files.
var errNoReflink = errors.New("reflinks not supported here")

// FileCopier copies files, sharing their blocks copy-on-write where the
// file system can (FICLONE on Linux) and copying them otherwise; after the
// first file system that refuses a reflink it stops asking. Its zero value
// is ready, and it is safe for concurrent use.
type FileCopier struct {
	noReflink atomic.Bool
}

// Copy creates dst (which must not exist) with the content of src and
// permission bits perm, and says whether it was reflinked.
func (c *FileCopier) Copy(src, dst string, perm fs.FileMode) (reflinked bool, err error) {
	in, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, err
	}
	if !c.noReflink.Load() {
		switch err := reflink(in, out); {
		case err == nil:
			reflinked = true
		case errors.Is(err, errNoReflink):
			c.noReflink.Store(true)
		default:
			out.Close()
			return false, err
		}
	}
	if !reflinked {
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return false, err
		}
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		return false, err
	}
	return reflinked, out.Close()
}

// copySparse copies the disk image src to dst (which must not exist),
// only its data, leaving holes as holes (SEEK_DATA/SEEK_HOLE) so that a
// sparse image stays sparse. A failed copy leaves no dst behind.
func copySparse(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if err := out.Truncate(fi.Size()); err != nil {
		return err
	}
	return copyData(in, out, fi.Size())
}

// copyRange copies n bytes at off from src to dst.
func copyRange(src, dst *os.File, off, n int64) error {
	_, err := io.Copy(io.NewOffsetWriter(dst, off), io.NewSectionReader(src, off, n))
	return err
}
