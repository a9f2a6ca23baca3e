//go:build unix

package image

import (
	"os"
	"syscall"
)

// allocatedBytes is how much of the host's disk a file takes (st_blocks),
// which for a sparse image is far less than its size.
func allocatedBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
