package manifest

import (
	"io/fs"
	"syscall"
)

// statOf extracts the stat data HashCache compares.
func statOf(info fs.FileInfo) (fileStat, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return fileStat{
		size:  st.Size,
		mtime: st.Mtimespec.Nano(),
		ctime: st.Ctimespec.Nano(),
		ino:   st.Ino,
		dev:   uint64(st.Dev),
		mode:  uint32(st.Mode),
	}, true
}
