// Package diskfree tells how much space is left on the file system
// holding a directory, for the checks made before and while Airlock
// writes something large (a disk, an image). It must not import anything
// of the module.
package diskfree

// Bytes is the space left for an unprivileged user on the file system
// holding dir, -1 when it cannot be told.
func Bytes(dir string) int64 { return bytes(dir) }
