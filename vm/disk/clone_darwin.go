package disk

import (
	"fmt"

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
