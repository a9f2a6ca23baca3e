//go:build !linux

package image

import (
	"fmt"
	"os"
)

// replaceDir replaces directory dst with directory src by moving dst aside
// first: for a moment there is no dst. It returns where the old dst is.
func replaceDir(src, dst string) (string, error) {
	old := src + ".old"
	if err := os.Rename(dst, old); err != nil {
		return "", fmt.Errorf("move %s aside: %w", dst, err)
	}
	if err := os.Rename(src, dst); err != nil {
		if rerr := os.Rename(old, dst); rerr != nil {
			return "", fmt.Errorf("move %s into %s: %w (and the old image is left at %s: %v)", src, dst, err, old, rerr)
		}
		return "", fmt.Errorf("move %s into %s: %w", src, dst, err)
	}
	return old, nil
}
