package image

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// replaceDir atomically swaps directory dst with directory src
// (renameat2 RENAME_EXCHANGE), so dst is never missing, and returns where
// the old dst now is (src).
func replaceDir(src, dst string) (string, error) {
	if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE); err != nil {
		return "", fmt.Errorf("swap %s into %s: %w", src, dst, err)
	}
	return src, nil
}
