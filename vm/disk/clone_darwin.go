package disk

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// fileClone is APFS's clonefile: the new file shares src's blocks.
func fileClone() (Method, func(src, dst string) error) {
	return MethodClone, func(src, dst string) error {
		if err := unix.Clonefile(src, dst, unix.CLONE_NOFOLLOW); err != nil {
			return fmt.Errorf("clonefile: %w", err)
		}
		return nil
	}
}

// reflink between open files is not wired up here (clonefile(2) works on
// paths and creates its target): files are copied.
func reflink(src, dst *os.File) error { return errNoReflink }
