// Package confine restricts the calling process, and every process it
// starts afterwards, to the files it names: Landlock on Linux, nothing
// elsewhere. A VM's supervisor confines itself this way just before it
// starts QEMU, so that a guest that escaped into QEMU finds only that
// machine's own files. It must not import anything of the module.
package confine

import "errors"

// Rules name what a confined process may still reach. Every path may be
// a directory (its whole tree) or a file; a path that does not exist is
// left out. Everything not named can no longer be opened, listed,
// created or removed; what is already open stays usable.
type Rules struct {
	// Read may be read, listed and run: programs, libraries, firmware,
	// the machine's kernel and read-only disks.
	Read []string
	// Write may also be written, created in and removed from: the run
	// directory and the writable disks.
	Write []string
	// Devices may be read, written and controlled (ioctl): /dev/kvm.
	Devices []string
	// NoTCP forbids binding and connecting TCP sockets too.
	NoTCP bool
}

// ErrUnavailable is why Process confined nothing: the kernel has no
// Landlock, or the OS is not Linux.
var ErrUnavailable = errors.New("landlock is not available")

// Result says how a process was confined.
type Result struct {
	// ABI is the Landlock ABI the kernel applied (1 and up).
	ABI int
}

// Process confines the calling process, all its threads, and every
// process it starts from now on, to r. It cannot be undone. It returns
// an error wrapping ErrUnavailable when the kernel cannot confine, and
// confines nothing then.
func Process(r Rules) (Result, error) { return process(r) }
