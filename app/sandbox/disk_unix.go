//go:build unix

package sandbox

import (
	"io/fs"
	"syscall"
)

// allocated is the space fi's file takes on the host's disk (its blocks),
// or -1 when unknown.
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return -1
}
