//go:build linux || darwin

package sandbox

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// copyData copies the data of in (size bytes) into out at the same
// offsets, skipping holes (SEEK_DATA/SEEK_HOLE), so that a sparse disk
// image stays sparse. out is already size bytes long.
func copyData(out, in *os.File, size int64) error {
	for off := int64(0); off < size; {
		data, err := in.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			// No SEEK_DATA here: copy everything.
			return copyRange(out, in, off, size-off)
		}
		hole, err := in.Seek(data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if err := copyRange(out, in, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}
