//go:build darwin

package plan

import "golang.org/x/sys/unix"

// HostMemory is the Mac's memory in bytes (hw.memsize); 0 when it cannot
// tell. Virtualization.framework clamps a machine's memory to what it
// allows besides.
func HostMemory() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return int64(n)
}
