//go:build !linux

package transfer

import (
	"fmt"
	"io/fs"
	"os"
)

const nonBlock = 0

func isWhiteout(fs.FileInfo) bool { return false }

func canReadTrusted() error {
	return fmt.Errorf("an overlay's upper layer can be read on Linux only")
}

func isOpaque(*os.File) (bool, error) {
	return false, fmt.Errorf("an overlay's upper layer can be read on Linux only")
}
