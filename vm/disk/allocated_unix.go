//go:build unix

package disk

import (
	"io/fs"
	"syscall"
)

// Allocated is the space fi's file takes on the host's disk (its blocks),
// or -1 when unknown: a sparse image takes less than its size, a reflinked
// copy shares its blocks with its source.
func Allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return -1
}
