//go:build unix

package review

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

const noFollow = syscall.O_NOFOLLOW

// errSyncUnsupported is what fsync of a directory returns where it is not
// supported; it is ignored.
var errSyncUnsupported = errors.ErrUnsupported

// umask returns the process's umask. Linux shows it in /proc/self/status;
// elsewhere it is read by setting it and putting it back at once (the
// umask is process-wide, so a file another goroutine creates in between
// gets at most the bits it asked for).
func umask() fs.FileMode {
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Umask:")); ok {
				if m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32); err == nil {
					return fs.FileMode(m) & fs.ModePerm
				}
			}
		}
	}
	m := syscall.Umask(0o077)
	syscall.Umask(m)
	return fs.FileMode(m) & fs.ModePerm
}
