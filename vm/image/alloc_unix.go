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

// freeBytes is the space left for an unprivileged user on the file system
// holding dir, -1 when it cannot be told.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
