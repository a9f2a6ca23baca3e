package qemu

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// sharedRAM says whether fresh guest RAM is a memfd shared with the
// backend (Memory.Shared), which Save copies out instead of streaming it.
const sharedRAM = true

// newRAM makes the memfd holding size bytes of guest RAM. It holds no
// memory until the guest touches its pages.
func newRAM(size int64) (*os.File, error) {
	fd, err := unix.MemfdCreate("airlock-ram", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd for the guest RAM: %w", err)
	}
	f := os.NewFile(uintptr(fd), "airlock-ram")
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, fmt.Errorf("size the guest RAM memfd: %w", err)
	}
	return f, nil
}

// pageSize is the unit copyRAM leaves out when it holds only zeros.
const pageSize = 4096

// copyRAM writes the guest RAM in src into a new file at dst of the same
// size, sparse: pages the guest never touched (holes in the memfd) and
// pages of zeros stay holes, so the file takes on disk what the guest
// used.
func copyRAM(dst string, src *os.File) (err error) {
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	if err := out.Truncate(size); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	zero := make([]byte, pageSize)
	fd := int(src.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole from off to the end
		} else if err != nil {
			return fmt.Errorf("find the guest's pages: %w", err)
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("find the guest's pages: %w", err)
		}
		for off = data; off < hole; {
			n, err := src.ReadAt(buf[:min(int64(len(buf)), hole-off)], off)
			if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
				return fmt.Errorf("read the guest RAM: %w", err)
			}
			// Write runs of pages that are not all zeros.
			for i := 0; i < n; {
				if j := min(i+pageSize, n); bytes.Equal(buf[i:j], zero[:j-i]) {
					i = j
					continue
				}
				j := i + pageSize
				for j < n && !bytes.Equal(buf[j:min(j+pageSize, n)], zero[:min(j+pageSize, n)-j]) {
					j += pageSize
				}
				j = min(j, n)
				if _, err := out.WriteAt(buf[i:j], off+int64(i)); err != nil {
					return fmt.Errorf("write the RAM file: %w", err)
				}
				i = j
			}
			off += int64(n)
		}
	}
	return nil
}
