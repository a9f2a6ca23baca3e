// Package filelock takes an exclusive advisory lock on a file (flock), so
// that several processes of the user take turns at a shared file: the
// sandbox store's updates and the audit logs' appends.
//
// It uses the standard library only, so any package may import it; it
// must not import anything of Airlock's.
package filelock

import (
	"fmt"
	"os"
	"syscall"
)

// Lock takes an exclusive lock on path (created 0600 if needed), waiting
// for it, and returns the function that releases it. The kernel releases
// it too when the process dies, so a crash leaves no stale lock.
func Lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
