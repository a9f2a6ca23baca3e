//go:build linux || darwin

package disk

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// copyData copies the data of src (size bytes) into dst at the same
// offsets, skipping holes (SEEK_DATA/SEEK_HOLE), so that a sparse disk
// image stays sparse. dst is already size bytes long.
func copyData(src, dst *os.File, size int64) error {
	for off := int64(0); off < size; {
		data, err := src.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			// No SEEK_DATA here: copy everything.
			return copyRange(src, dst, off, size-off)
		}
		hole, err := src.Seek(data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if err := copyRange(src, dst, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}
