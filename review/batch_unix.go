//go:build unix && !linux

package review

import (
	"fmt"
	"os"
	"syscall"
)

// syncBatch fsyncs every file and directory, a few at a time, with
// fsync(2) alone; then, once per file system, os.File.Sync, which on
// macOS is fcntl(F_FULLFSYNC): the drive writes its cache out, with what
// the plain fsyncs handed it. A crash after it loses none of them.
func syncBatch(files []string, dirs map[string]bool) error {
	plain := func(f *os.File) error { return syscall.Fsync(int(f.Fd())) }
	if err := syncFiles(files, false, plain); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	if err := syncFiles(ds, true, plain); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	seen := map[uint64]bool{}
	for _, d := range ds {
		fi, err := os.Stat(d)
		if gone(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && seen[uint64(st.Dev)] {
			continue
		}
		if ok {
			seen[uint64(st.Dev)] = true
		}
		if err := syncPath(d, (*os.File).Sync); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
	}
	return nil
}
