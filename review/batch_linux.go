package review

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncBatch syncs each file system that holds one of dirs, once
// (syncfs(2)): every file written there and every directory entry
// changed is durable when it returns. Since Linux 5.8 syncfs reports a
// write-back error of any file on the file system.
func syncBatch(files []string, dirs map[string]bool) error {
	seen := map[uint64]bool{}
	for d := range dirs {
		f, err := os.Open(d)
		if gone(err) {
			continue // removed since: its parent is in dirs too
		}
		if err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		var st unix.Stat_t
		err = unix.Fstat(int(f.Fd()), &st)
		if err == nil && !seen[st.Dev] {
			seen[st.Dev] = true
			err = unix.Syncfs(int(f.Fd()))
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
	}
	return nil
}
